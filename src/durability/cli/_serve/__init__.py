"""`durability serve`: a worker module or a wrangler project over HTTP, on the embedded runtime."""
