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

// Scan to claim (templates/web/scan.html). A barcode scanner types the EUID and presses
// Enter, so after every outcome the field must be empty and focused for the next scan.
(function () {
  var lastSent = "";

  // The form that sent the request (htmx names the swap target as elt in swap events).
  function scanForm(event) {
    var detail = event.detail || {};
    var elt = (detail.requestConfig && detail.requestConfig.elt) || detail.elt;
    return elt && elt.id === "scan-form" ? elt : null;
  }

  function fromScanForm(event) {
    return scanForm(event) !== null;
  }

  function field() {
    return document.getElementById("scan-euid");
  }

  function refocus() {
    var input = field();
    if (input) input.focus();
  }

  // A scanner's double Enter lands on the emptied field: send nothing, say nothing.
  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && event.target.id === "scan-euid" && !event.target.value.trim()) {
      event.preventDefault();
    }
  });

  // htmx has read the form by now: empty the field at once, so whatever the scanner types
  // while the claim runs is the next scan rather than appended to this one.
  document.addEventListener("htmx:beforeSend", function (event) {
    if (!fromScanForm(event)) return;
    var input = field();
    lastSent = input.value.trim();
    input.value = "";
    input.focus();
  });

  // A refusal (4xx) is an answer to show like a success, not a failed request. An answer
  // from another page (the sign-in page once the session has ended) is followed instead.
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (!fromScanForm(event)) return;
    var xhr = event.detail.xhr;
    if (xhr.responseURL && new URL(xhr.responseURL).pathname !== scanForm(event).getAttribute("action")) {
      event.detail.shouldSwap = false;
      window.location.assign(xhr.responseURL);
      return;
    }
    var status = xhr.status;
    if (status >= 400 && status < 500) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  // No answer (network) or a server failure: nothing was swapped in, so say it here. The
  // request may have reached the server, so the next scan gets a key of its own rather than
  // reusing this one.
  function unanswered(event, text) {
    if (!fromScanForm(event)) return;
    var outcome = document.getElementById("scan-outcome");
    var section = document.createElement("section");
    section.className = "refusal";
    section.id = "scan-result";
    section.setAttribute("role", "alert");
    var heading = document.createElement("h2");
    heading.textContent = "Not confirmed: " + lastSent;
    var body = document.createElement("p");
    body.textContent = text;
    section.append(heading, body);
    outcome.replaceChildren(section);
    var key = document.querySelector("#scan-guard input[name=idempotency_key]");
    if (key) {
      var bytes = new Uint8Array(16);
      crypto.getRandomValues(bytes);
      key.value = Array.from(bytes, function (b) { return b.toString(16).padStart(2, "0"); }).join("");
    }
  }
  document.addEventListener("htmx:sendError", function (event) {
    unanswered(event, "The server did not answer. Check My work to see whether it was claimed, then scan again.");
  });
  document.addEventListener("htmx:responseError", function (event) {
    unanswered(event, "The server failed to answer. Check My work to see whether it was claimed, then scan again.");
  });

  document.addEventListener("htmx:afterRequest", function (event) {
    if (fromScanForm(event)) refocus();
  });
})();
