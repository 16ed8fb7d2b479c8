// Pause / resume the dashboard's htmx auto-refresh. The pause is checked here rather than in an
// hx-trigger filter, which htmx would have to eval (the Content-Security-Policy forbids eval).
document.addEventListener("htmx:confirm", function (event) {
  if (window.bloomopsPaused && event.target.closest("[data-poll]")) event.preventDefault();
});
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-refresh-toggle]");
  if (!button) return;
  window.bloomopsPaused = !window.bloomopsPaused;
  button.setAttribute("aria-pressed", window.bloomopsPaused ? "true" : "false");
  button.textContent = window.bloomopsPaused ? "Resume auto-refresh" : "Pause auto-refresh";
  var note = document.getElementById("refresh-note");
  if (note) note.textContent = window.bloomopsPaused ? "Auto-refresh paused." : "Auto-refresh on.";
});
