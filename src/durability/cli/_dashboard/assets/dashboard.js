// Refreshes the dashboard's panel every few seconds from /_durability/api/panel.
// The panel arrives as HTML rendered (and escaped) by the server; tracebacks the
// reader had opened stay open across refreshes.
"use strict";

(function () {
  const panel = document.getElementById("panel");
  const status = document.getElementById("status");
  const every = Number(document.body.dataset.refreshMs) || 2000;

  function openTracebacks() {
    return new Set(Array.from(panel.querySelectorAll("details[open][id]"), (d) => d.id));
  }

  async function refresh() {
    try {
      const response = await fetch("/_durability/api/panel", { cache: "no-store" });
      if (!response.ok) {
        throw new Error("HTTP " + response.status);
      }
      const html = await response.text();
      const open = openTracebacks();
      panel.innerHTML = html;
      for (const id of open) {
        const details = document.getElementById(id);
        if (details) {
          details.open = true;
        }
      }
      status.textContent = "updated " + new Date().toLocaleTimeString();
      status.className = "ok";
    } catch (error) {
      status.textContent = "cannot refresh (" + error.message + "): retrying";
      status.className = "stale";
    } finally {
      window.setTimeout(refresh, every);
    }
  }

  window.setTimeout(refresh, every);
})();
