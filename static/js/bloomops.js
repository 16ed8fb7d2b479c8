// My work: a barcode scanner types into whatever has focus and presses Enter. In a failure's
// or a release's words that Enter sent the form (a release, or a failure "Z-MX-2K9", that
// nobody chose).
// A scan while a result was focused (a QC's Pass just tapped) sent the Complete form too: an
// item completed and moved on that nobody meant to. Every form of a card is sent by its
// button alone.
document.addEventListener("keydown", function (event) {
  if (event.key === "Enter" && event.target.tagName === "INPUT" &&
      event.target.closest(".work-item form")) event.preventDefault();
});

// My work on a tablet whose Wi-Fi dropped: a form sent then left the browser's "site can't be
// reached" page, and nothing said whether it was done. Nothing is sent while the browser knows
// it is offline; the card says so and keeps what was typed (sending again later is safe: each
// form carries its idempotency key).
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (navigator.onLine !== false || !form.closest("#my-leases, #renew-all")) return;
  event.preventDefault();
  var item = form.closest(".work-item");
  var said = item ? item.querySelector(".expiry-warning") : null;
  var text = "No network: nothing was sent. Send it again once the tablet is back online.";
  if (said) said.textContent = text;
  else window.alert(text);
}, true);

// Pause / resume the dashboard's htmx auto-refresh. The pause is checked here rather than in an
// hx-trigger filter, which htmx would have to eval (the Content-Security-Policy forbids eval).
document.addEventListener("htmx:confirm", function (event) {
  if (window.bloomopsPaused && event.target.closest("[data-poll]")) event.preventDefault();
});
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-refresh-toggle]");
  if (!button) return;
  window.bloomopsPaused = !window.bloomopsPaused;
  // a toggle keeps its name and says its state by being pressed (a changed name read
  // "Resume auto-refresh, pressed", which contradicts itself)
  button.setAttribute("aria-pressed", window.bloomopsPaused ? "true" : "false");
  var note = document.getElementById("refresh-note");
  if (note) {
    // the server's words ("Refreshes every 5 s.") come back on resume
    if (!note.hasAttribute("data-running")) note.setAttribute("data-running", note.textContent);
    note.textContent = window.bloomopsPaused ? "Auto-refresh paused."
                                             : note.getAttribute("data-running");
  }
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

  // A glove's tap elsewhere on the page took the focus, and the next scan's keys went
  // nowhere: a key typed with no field focused goes to the scan field.
  document.addEventListener("keydown", function (event) {
    var input = field();
    var here = document.activeElement;
    if (!input || event.ctrlKey || event.metaKey || event.altKey || event.key.length !== 1 ||
        (here && here !== document.body && here.matches("input, select, textarea")) ||
        // Space presses a focused button or link (a keyboard's way to sign out or claim)
        (event.key === " " && here && here.matches("button, a[href], summary"))) return;
    input.focus();
  }, true);

  // When each character of the field's text was typed: a scanner types a label within a few
  // milliseconds a character, a person's fingers take far longer.
  // On average: a busy tablet may hold one of a scanner's keys back a while.
  var typedAt = [];
  var SCANNER_GAP_MS = 60;

  function scannerTyped(value) {
    var n = Math.min(typedAt.length, value.length);
    if (n < 4 || n < value.length) return false;
    var last = typedAt.length - 1;
    return (typedAt[last] - typedAt[last - n + 1]) / (n - 1) <= SCANNER_GAP_MS;
  }

  // A scanner's double Enter lands on the emptied field: send nothing, say nothing.
  document.addEventListener("keydown", function (event) {
    if (event.target.id !== "scan-euid") return;
    if (!event.target.value) typedAt = [];
    if (event.key.length === 1) typedAt.push(event.timeStamp);
    if (event.key === "Enter" && !event.target.value.trim()) {
      event.preventDefault();
    }
    // A scanner set to end its scan with Tab moved the focus to Claim and sent nothing, and
    // the next scan was glued to it: Tab after a scan sends it, as Enter does. A person's
    // Tab (what they typed came slower than a scanner types) moves on, as it does anywhere.
    if (event.key === "Tab" && !event.shiftKey && event.target.value.trim() &&
        scannerTyped(event.target.value)) {
      event.preventDefault();
      event.target.form.requestSubmit();
    }
  });

  // Each scan is taken out of the field when its Enter submits, before htmx sees the form:
  // a scan queued behind a claim still running (hx-sync) was read only when its turn came,
  // with the next scan's keys already in the field ("Z-MX-2SXZ-MX-280"), and emptying the
  // field then cut the next one short. The scans wait here, in order, one per request.
  var scans = [];
  document.addEventListener("submit", function (event) {
    if (event.target.id !== "scan-form" || !window.htmx) return;  // posted whole without htmx
    var input = field();
    scans.push(input.value.trim());
    input.value = "";
    input.focus();
  }, true);
  document.addEventListener("DOMContentLoaded", function () {
    var input = field();  // emptied at once: a queued request must not be held up by it
    if (input && window.htmx) input.removeAttribute("required");
  });
  document.addEventListener("htmx:configRequest", function (event) {
    if (!fromScanForm(event)) return;
    lastSent = scans.length ? scans.shift() : "";
    event.detail.parameters.euid = lastSent;
  });

  document.addEventListener("htmx:beforeSend", function (event) {
    if (!fromScanForm(event)) return;
    keep();
    // Until the answer comes, the outcome says which scan is being checked (the previous
    // scan's green "Claimed" stayed up through a slow answer). Another id than an answer's:
    // htmx would give an answer the pending one's attributes until it settles.
    show("pending", "scan-pending", "status", "Checking " + lastSent + "\u2026");
  });

  // An outcome the page says itself (no answer to swap in): the scan result's place.
  function show(css, id, role, headline, text, outcomeKind) {
    var section = document.createElement("section");
    section.className = css;
    section.id = id;
    // an outcome is said in one sentence where a screen reader listens; "Checking" is not:
    // the answer follows at once
    if (outcomeKind) say(role, headline + (text ? ". " + text : ""));
    var heading = document.createElement("h2");
    if (outcomeKind) heading.setAttribute("data-outcome", outcomeKind);
    heading.textContent = headline;
    section.append(heading);
    if (text) {
      var body = document.createElement("p");
      body.textContent = text;
      section.append(body);
    }
    document.getElementById("scan-outcome").replaceChildren(section);
  }

  // One sentence per outcome into the live region of its kind (web/_scan_said.html), the
  // regions emptied first and filled a moment later: a region is read when its words change,
  // and the same tube refused twice gave the same words.
  var sayTimer;
  function say(kind, sentence) {
    var region = document.getElementById(kind === "alert" ? "scan-said-alert" : "scan-said-status");
    var other = document.getElementById(kind === "alert" ? "scan-said-status" : "scan-said-alert");
    if (!region) return;
    region.textContent = "";
    if (other) other.textContent = "";
    window.clearTimeout(sayTimer);
    sayTimer = window.setTimeout(function () { region.textContent = sentence; }, 150);
  }
  document.addEventListener("htmx:afterSettle", function () {
    var next = document.getElementById("scan-said-next");
    var kind = next && next.getAttribute("data-said");
    if (!kind) return;
    next.removeAttribute("data-said");  // said once
    say(kind, next.textContent.trim());
  });

  // Every outcome is also listed, newest first (ten): a quick next scan replaced it unread.
  // The list is kept in the tab (sessionStorage) under the sign-in's key, so a reload (a
  // tablet's browser reloads a page it put away) keeps it; another sign-in has another key.
  var logged = new WeakSet();
  var LOG_PREFIX = "bloomops.scan-log.";
  function logKey() {
    var log = document.getElementById("scan-log");
    return log && log.dataset.key ? LOG_PREFIX + log.dataset.key : null;
  }
  // each entry leads where its outcome did (the claim's work view, the refused item's page):
  // a list of plain text could not be tapped to act on an earlier claim
  function logItem(log, kind, text, href) {
    var item = document.createElement("li");
    item.className = "log-" + kind;
    if (href && /^\/[^\/]/.test(href)) {
      var link = document.createElement("a");
      link.href = href;
      link.textContent = text;
      item.append(link);
    } else {
      item.textContent = text;
    }
    log.prepend(item);
    while (log.children.length > 10) log.lastElementChild.remove();
    log.parentElement.hidden = false;
  }
  function saveLog(log) {
    var key = logKey();
    if (!key) return;
    var items = Array.from(log.children, function (li) {
      var link = li.querySelector("a");
      return {kind: li.className.replace(/^log-/, ""), text: li.textContent,
              href: link ? link.getAttribute("href") : null};
    });
    try {
      // only this sign-in's list is kept: an earlier one's in this tab is dropped
      var keys = [];  // first: a removal reorders the rest
      for (var i = 0; i < sessionStorage.length; i++) keys.push(sessionStorage.key(i));
      keys.forEach(function (k) {
        if (k && k.indexOf(LOG_PREFIX) === 0 && k !== key) sessionStorage.removeItem(k);
      });
      sessionStorage.setItem(key, JSON.stringify(items));
    } catch (e) { /* storage off or full: the list lasts as long as the page */ }
  }
  function restoreLog() {
    var log = document.getElementById("scan-log");
    var key = logKey();
    if (!log || !key) return;
    var items;
    try { items = JSON.parse(sessionStorage.getItem(key) || "[]"); } catch (e) { items = []; }
    if (!Array.isArray(items)) return;
    items.slice(0, 10).reverse().forEach(function (entry) {
      if (entry && typeof entry.text === "string" && /^(claimed|refusal)$/.test(entry.kind)) {
        logItem(log, entry.kind, entry.text,
                typeof entry.href === "string" ? entry.href : null);
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", restoreLog);
  else restoreLog();
  function keep() {
    var result = document.getElementById("scan-result");
    var log = document.getElementById("scan-log");
    var heading = result && result.querySelector("h2");
    if (!heading || !log || logged.has(result)) return;
    logged.add(result);
    // read from the heading: the section's own attributes may still be the last answer's
    var lead = result.querySelector('a.button[href*="item="], a[href^="/subjects/"]');
    logItem(log, heading.getAttribute("data-outcome") || "refusal", heading.textContent.trim(),
            lead ? lead.getAttribute("href") : null);
    saveLog(log);
  }

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
    show("refusal", "scan-result", "alert", "Not confirmed: " + lastSent, text, "refusal");
    keep();
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
  // after settling: until then htmx gives the new outcome the old one's attributes
  document.addEventListener("htmx:afterSettle", function (event) {
    if (fromScanForm(event) && event.detail.elt && event.detail.elt.id === "scan-outcome") keep();
  });
})();

// A table read as cards on a phone (table.cards, bloomops.css) heads each cell with its
// column's name, unless the page named it already.
(function () {
  function label(root) {
    (root.querySelectorAll ? root : document).querySelectorAll("table.cards").forEach(
      function (table) {
        var heads = table.querySelectorAll("thead th");
        table.querySelectorAll("tbody tr").forEach(function (row) {
          Array.prototype.forEach.call(row.children, function (cell, i) {
            // a column of checkboxes ("Select all") heads its cells with nothing
            var name = heads[i] && !heads[i].querySelector("input") &&
              heads[i].textContent.trim();
            if (name && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", name);
          });
        });
      });
  }
  document.addEventListener("DOMContentLoaded", function () { label(document); });

  // A page answering a refused form starts where the refusal is: at the field marked
  // invalid, else at the message saying why (it came back with the focus at the page's top,
  // the field a tablet's screen below, and a screen reader read the page from the start).
  document.addEventListener("DOMContentLoaded", function () {
    // One field refused: the focus at it (its words beside it). Several: at the message
    // naming them all, in the card's order (a screen reader at the first field heard its
    // problem alone; the list above was on the page already and not read out).
    var fields = document.querySelectorAll('main [aria-invalid="true"]');
    var said = document.querySelector(".messages li.error");
    var region = said && said.closest("[role=status]");
    if (fields.length === 1 && fields[0].focus) { fields[0].focus(); return; }
    if (region) { region.setAttribute("tabindex", "-1"); region.focus(); return; }
    if (fields.length && fields[0].focus) { fields[0].focus(); return; }
    // an answer naming its part of the page (a renewal: its card) starts the focus there
    var named = window.location.hash && document.getElementById(window.location.hash.slice(1));
    if (named && named.matches("main h2")) {
      named.setAttribute("tabindex", "-1");
      named.focus();
    }
  });

  // The main navigation says which screen this is (aria-current, and a mark under it).
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".topbar nav a").forEach(function (a) {
      if (a.pathname === window.location.pathname) a.setAttribute("aria-current", "page");
    });
  });
  document.addEventListener("htmx:afterSettle", function (event) { label(event.target); });
})();

// What may scroll sideways inside a page: wide data tables.
window.bloomopsSideways = "table.grid, .table-container";

// Auto-refresh (a [data-poll] panel swapped by htmx) must never move the reader: the focused
// control is found again in the new panel and focused without scrolling, and the page stays
// where it was scrolled to. Kept per panel: two panels (the table, the charts) may be
// swapped at once.
(function () {
  var kept = {};

  // A control is found again by its id; else in its place in the panel, if a link there
  // still leads where it led and says what it said; else a link anywhere that does (rows
  // moved); else (its words changed: a count went down) in its place, if a link there still
  // leads where it led. Place first: two links of a row may lead to the same page and say
  // the same number (Held and Dead letter).
  function pathOf(el, root) {
    if (el.id) return { id: el.id };
    var steps = [];
    for (var node = el; node && node !== root; node = node.parentElement) {
      steps.unshift(Array.prototype.indexOf.call(node.parentElement.children, node));
    }
    return { href: el.getAttribute("href"), text: el.textContent, steps: steps };
  }

  function find(root, path) {
    if (path.id) return document.getElementById(path.id);
    var node = root, deepest = root;
    for (var i = 0; node && i < path.steps.length; i++) {
      node = node.children[path.steps[i]];
      if (node) deepest = node;
    }
    if (path.href === null) return node || placeOf(deepest, root);
    var placed = node && node.getAttribute("href") === path.href ? node : null;
    if (placed && placed.textContent === path.text) return placed;
    var same = Array.prototype.find.call(root.querySelectorAll("[href]"), function (a) {
      return a.getAttribute("href") === path.href && a.textContent === path.text;
    });
    return same || placed || placeOf(deepest, root);
  }

  // The control is gone (a count fell to 0 and its link became text): focus stays where it
  // was, on what is there now (the cell), rather than falling to the page's start.
  function placeOf(el, root) {
    if (!el || el === root) return null;
    if (!el.matches("a[href], button, input, select, textarea, [tabindex]")) {
      el.setAttribute("tabindex", "-1");
    }
    return el;
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var panel = event.detail.target;
    if (!panel || !panel.matches || !panel.matches("[data-poll]") || !panel.id) return;
    var active = document.activeElement;
    kept[panel.id] = { x: window.scrollX, y: window.scrollY,
                       path: active && panel.contains(active) ? pathOf(active, panel) : null,
                       // a table opened to read a chart's figures stays open
                       open: Array.prototype.map.call(panel.querySelectorAll("details[id][open]"),
                                                      function (el) { return el.id; }),
                       sideways: Array.prototype.map.call(
                         panel.querySelectorAll(window.bloomopsSideways), function (el) {
                           return el.scrollLeft;
                         }) };
  });

  document.addEventListener("htmx:afterSettle", function (event) {
    var settled = event.detail.elt;
    var id = settled && settled.id;
    var k = id ? kept[id] : null;
    if (!k) return;
    delete kept[id];
    var panel = document.getElementById(id);
    k.open.forEach(function (name) {
      var opened = document.getElementById(name);
      if (opened && panel && panel.contains(opened)) opened.open = true;
    });
    if (k.path && panel) {
      var el = find(panel, k.path);
      if (el && el.focus) el.focus({ preventScroll: true });
    }
    // a table scrolled sideways on a phone stays where the reader scrolled it
    if (panel) {
      panel.querySelectorAll(window.bloomopsSideways).forEach(function (el, i) {
        if (k.sideways[i]) el.scrollLeft = k.sideways[i];
      });
    }
    window.scrollTo(k.x, k.y);
    // and once more when the new part has been laid out (a late layout moved it otherwise)
    window.requestAnimationFrame(function () { window.scrollTo(k.x, k.y); });
  });
})();

// A table that scrolls inside itself (a phone, a long name) says so: data-more names the
// side more columns lie on ("left", "right" or both), and the stylesheet shades that edge.
(function () {
  function mark(el) {
    var more = [];
    if (el.scrollLeft > 1) more.push("left");
    if (el.scrollWidth - el.clientWidth - el.scrollLeft > 1) more.push("right");
    if (more.length) el.setAttribute("data-more", more.join(" "));
    else el.removeAttribute("data-more");
    // a keyboard scrolls it only once it can be focused (a table with no link or field)
    var scrolls = el.scrollWidth - el.clientWidth > 1;
    if (scrolls && !el.hasAttribute("tabindex")) {
      el.setAttribute("tabindex", "0");
      el.setAttribute("data-scroll-focus", "");
    } else if (!scrolls && el.hasAttribute("data-scroll-focus")) {
      el.removeAttribute("tabindex");
      el.removeAttribute("data-scroll-focus");
    }
  }

  function markAll() {
    document.querySelectorAll(window.bloomopsSideways).forEach(mark);
  }

  document.addEventListener("DOMContentLoaded", markAll);
  document.addEventListener("htmx:afterSettle", markAll);
  window.addEventListener("resize", markAll);
  // scroll events do not bubble: caught on their way down instead
  document.addEventListener("scroll", function (event) {
    var el = event.target;
    if (el.matches && el.matches(window.bloomopsSideways)) mark(el);
  }, true);
})();

// Humane times (the |humane filter): the wall-clock part in the reader's own time zone.
(function () {
  function localise(root) {
    root.querySelectorAll("time[data-humane] .local").forEach(function (span) {
      var moment = new Date(span.parentElement.getAttribute("datetime"));
      if (isNaN(moment.getTime())) return;
      // 24-hour, as the server writes times everywhere else
      var options = { hour: "2-digit", minute: "2-digit", hourCycle: "h23",
                      timeZoneName: "short" };
      var today = new Date();
      if (moment.toDateString() !== today.toDateString()) {
        options.day = "numeric";
        options.month = "short";
      }
      if (moment.getFullYear() !== today.getFullYear()) options.year = "numeric";
      // day before month, as the server writes dates ("28 Nov", never "Nov 28" beside it)
      var shown = new Intl.DateTimeFormat("en-GB", options).format(moment);
      // in brackets after |humane's words; alone in a banner's sentence (wall_clock)
      span.textContent = span.textContent.trim().charAt(0) === "(" ? "(" + shown + ")" : shown;
    });
  }
  // A form asking for the reader's day ("today" on the hold search) is told their zone; so
  // is the server, for a page's first visit (the cookie web/periods.py ZONE_COOKIE reads).
  function zone() {
    var name = Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    document.querySelectorAll("input[data-local-zone]").forEach(function (input) {
      if (!input.value) input.value = name;
    });
    if (name && /^[A-Za-z0-9_+\-\/]{1,64}$/.test(name)) {
      document.cookie = "bloomops_tz=" + name + "; path=/; max-age=31536000; SameSite=Lax" +
        (location.protocol === "https:" ? "; Secure" : "");
    }
  }
  // The charts' times (charts.py: an axis's "now", a point's title, a figures row) and the
  // zone their tables name: written in UTC by the server, said here in the reader's zone as
  // every time beside them is (UTC under a reader's own hours read as other hours).
  var CLOCK = {
    time: { hour: "2-digit", minute: "2-digit", hourCycle: "h23" },
    day: { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit",
           hourCycle: "h23" },
    now: { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short" },
    point: { day: "numeric", month: "short", hour: "2-digit", minute: "2-digit",
             second: "2-digit", hourCycle: "h23", timeZoneName: "short" }
  };
  function clocks(root) {
    root.querySelectorAll("[data-at][data-clock]").forEach(function (el) {
      var moment = new Date(el.getAttribute("data-at"));
      var form = CLOCK[el.getAttribute("data-clock")];
      if (isNaN(moment.getTime()) || !form) return;
      var shown = new Intl.DateTimeFormat("en-GB", form).format(moment).replace(",", "");
      var kind = el.getAttribute("data-clock"), text = el.textContent;
      if (kind === "now") shown = "now (" + shown + ")";
      // a point's title goes on after its instant: "<instant>: highest depth 3"
      else if (kind === "point") shown += text.slice(text.indexOf(": "));
      el.textContent = shown;
    });
    var here = new Intl.DateTimeFormat("en-GB", { timeZoneName: "short" })
      .formatToParts(new Date()).filter(function (part) {
        return part.type === "timeZoneName";
      });
    if (!here.length) return;
    root.querySelectorAll("[data-zone-name]").forEach(function (el) {
      el.textContent = here[0].value;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    localise(document); clocks(document); zone();
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    localise(event.target); clocks(event.target);
  });

  // The relative words move on while the page stays open (a due time on a tablet read "in
  // 20 h" all day): from how far off the server said it was (data-from-now, by its clock,
  // not the browser's), less the time the page has shown it. Words as the server's
  // timewords.relative and readable_seconds write them.
  function words(seconds) {
    var s = Math.floor(Math.abs(seconds));
    var d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
    var m = Math.floor((s % 3600) / 60);
    var said = d ? d + " d" + (h ? " " + h + " h" : "") : h ? h + " h" + (m ? " " + m + " min" : "")
      : m ? m + " min" : (s % 60) + " s";
    if (Math.abs(seconds) < 10) return "just now";
    return seconds > 0 ? "in " + said : said + " ago";
  }
  function move(root) {
    var now = Date.now();
    root.querySelectorAll("time[data-humane] .ago[data-from-now]").forEach(function (span) {
      if (!span.dataset.shownAt) span.dataset.shownAt = String(now);
      var ahead = parseInt(span.dataset.fromNow, 10) -
        (now - parseInt(span.dataset.shownAt, 10)) / 1000;
      var said = words(ahead);
      if (span.textContent !== said) span.textContent = said;
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    move(document);
    window.setInterval(function () { move(document); }, 30000);
  });
  document.addEventListener("htmx:afterSettle", function (event) { move(event.target); });
})();

// My work (templates/web/my_work.html): every claim counts down from the seconds the server
// computed (the server's clock decides expiry, not the browser's) and warns, once, in a
// polite live region, before it runs out.
(function () {
  var started = Date.now();

  function readable(seconds) {
    var h = Math.floor(seconds / 3600), m = Math.floor((seconds % 3600) / 60), s = seconds % 60;
    if (h) return h + " h " + m + " min";
    if (m) return m + " min " + (s < 10 ? "0" : "") + s + " s";
    return s + " s";
  }

  function tick() {
    var elapsed = Math.floor((Date.now() - started) / 1000);
    document.querySelectorAll(".countdown[data-seconds-left]").forEach(function (clock) {
      var left = Math.max(0, parseInt(clock.dataset.secondsLeft, 10) - elapsed);
      var warnAt = parseInt(clock.dataset.warnSeconds, 10);
      var item = clock.closest(".work-item");
      clock.textContent = left > 0 ? readable(left) : "ran out";
      if (!item) return;
      item.classList.toggle("expiring", left <= warnAt);
      var warning = item.querySelector(".expiry-warning");
      var text = left <= 0
        ? "Your claim has run out: the item is going back to its queue. Reload My work to see what happened."
        : left <= warnAt ? "Less than " + clock.dataset.warnWords + " left: renew now or the item goes back to its queue." : "";
      // Only a change is written, so a screen reader hears each warning once.
      if (warning && warning.textContent !== text) warning.textContent = text;
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (!document.querySelector(".countdown[data-seconds-left]")) return;
    tick();
    window.setInterval(tick, 1000);
  });

  // The page's poll (#my-claims-poll) names the claims that still hold; a card whose claim
  // ended meanwhile (QA put the item on hold, an admin ended the claim) stops counting down
  // and offering buttons that would only be refused, and says to reload for why.
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.elt.id !== "my-claims-poll" || !event.detail.successful) return;
    var held, left;
    try {
      var said = JSON.parse(event.detail.xhr.responseText);
      held = said.held;
      left = said.left || {};
    } catch (e) { return; }
    // each claim that holds counts down from what the server says now: one renewed on
    // another device read "ran out" while it held
    var elapsed = Math.floor((Date.now() - started) / 1000);
    document.querySelectorAll(".work-item[data-lease]").forEach(function (item) {
      var clock = item.querySelector(".countdown[data-seconds-left]");
      if (clock && typeof left[item.dataset.lease] === "number") {
        clock.dataset.secondsLeft = left[item.dataset.lease] + elapsed;
      }
    });
    tick();
    // claims made elsewhere (another device, a tab) are said, not silently missing
    var shown = Array.prototype.map.call(
      document.querySelectorAll(".work-item[data-lease]"), function (i) { return i.dataset.lease; });
    var more = document.getElementById("more-claims");
    if (more && !new URLSearchParams(window.location.search).has("item")) {
      var extra = held.filter(function (l) { return shown.indexOf(l) === -1; }).length;
      more.hidden = extra === 0;
      more.querySelector("span").textContent = extra === 1 ? "1 claim" : extra + " claims";
    }
    // what the navigation counts and Renew all renews follow the claims that still hold
    var count = document.querySelector("#nav-my-work .badge");
    if (count) { if (held.length) count.textContent = held.length; else count.remove(); }
    var renewAll = document.querySelector("#renew-all button");
    if (renewAll) {
      if (held.length > 1) renewAll.textContent = "Renew all " + held.length;
      else renewAll.closest("form").hidden = true;
    }
    document.querySelectorAll(".work-item[data-lease]").forEach(function (item) {
      if (held.indexOf(item.dataset.lease) !== -1 || item.classList.contains("ended")) return;
      item.classList.add("ended");
      var clock = item.querySelector(".countdown");
      if (clock) { clock.removeAttribute("data-seconds-left"); clock.textContent = "ended"; }
      // what was typed stays readable and can be copied (a disabled field's words cannot
      // be selected); nothing can be sent, and the card's controls leave the Tab order
      var focusWasHere = item.contains(document.activeElement);
      item.querySelectorAll("input, textarea").forEach(function (field) {
        field.readOnly = true;
      });
      item.querySelectorAll("button, select, input[type=radio], input[type=checkbox]")
        .forEach(function (control) { control.disabled = true; });
      item.querySelectorAll("summary, a[href]").forEach(function (control) {
        control.setAttribute("tabindex", "-1");
      });
      item.querySelectorAll("form").forEach(function (form) {
        form.addEventListener("submit", function (event) { event.preventDefault(); });
      });
      var warning = item.querySelector(".expiry-warning");
      if (warning) {
        warning.textContent = "This item is no longer yours: its claim ended. ";
        var again = document.createElement("a");
        again.href = window.location.pathname;
        again.textContent = "Reload My work to see why";
        warning.append(again);
        // the focus was in the card: it goes to what says why, not to the page's start
        if (focusWasHere) again.focus();
        // ... and why, asked once, said in the card (who ended it, their reason)
        fetch(window.location.pathname + "?part=why&lease=" + encodeURIComponent(item.dataset.lease),
              { headers: { "X-Bloomops-Poll": "1" }, credentials: "same-origin" })
          .then(function (r) { return r.ok ? r.json() : null; })
          .then(function (why) {
            if (!why || !why.said) return;
            var said = document.createElement("span");
            said.className = "why-ended";
            said.textContent = why.said + "." + (why.why ? " Reason given: \u201c" + why.why + "\u201d." : "") + " ";
            warning.insertBefore(said, again);
            again.textContent = "Reload My work";
          })
          .catch(function () { /* the reload link still says how to see why */ });
      }
    });
  });
})();

// My work: the Complete button says where the item goes, so a wrong choice of Next queue is
// seen before the tap.
document.addEventListener("change", function (event) {
  var select = event.target;
  if (select.name !== "next_queue_key" || !select.form) return;
  var destination = select.form.querySelector("button .destination");
  if (!destination) return;
  var option = select.options[select.selectedIndex];
  if (option && option.hasAttribute("data-placeholder")) destination.textContent = "";
  else destination.textContent = option && option.value ? "→ " + option.textContent : "and finish";
});

// A form whose answer is a file (Download evidence) leaves the page as it was: the part it
// names (data-refreshes) is read again until it changes (a large bundle takes a while to
// make), so the bundle just recorded is listed without a reload; what the page does to
// new content (local times, table marks) is done to it as to an htmx swap.
document.addEventListener("submit", function (event) {
  var form = event.target;
  var id = form.getAttribute && form.getAttribute("data-refreshes");
  if (!id) return;
  var here = document.getElementById(id);
  var before = here ? here.innerHTML : "";
  var tries = 0;
  function look() {
    tries += 1;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        var fresh = html && new DOMParser().parseFromString(html, "text/html").getElementById(id);
        here = document.getElementById(id);
        if (fresh && here && fresh.innerHTML !== before) {
          here.innerHTML = fresh.innerHTML;
          if (window.htmx) window.htmx.process(here);
          here.dispatchEvent(new CustomEvent("htmx:afterSettle", { bubbles: true,
                                                                  detail: { elt: here } }));
        } else if (tries < 8) {
          window.setTimeout(look, 1500);
        }
      });
  }
  window.setTimeout(look, 1000);
});

// A token given on a person's page is shown once: its Copy button puts it on the clipboard
// (the field is selected first, so where the clipboard is not offered, outside HTTPS, the
// admin's own Ctrl+C copies it) and says whether it did.
document.addEventListener("click", function (event) {
  var button = event.target.closest("[data-copy]");
  if (!button) return;
  var field = document.getElementById(button.getAttribute("data-copy"));
  if (!field) return;
  field.focus();
  field.select();
  var said = function (text) { button.textContent = text; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(function () { said("Copied"); },
      function () { said("Press Ctrl+C to copy"); });
  } else {
    said("Press Ctrl+C to copy");
  }
});

// An evidence check is printed for the auditor's file: the page's own Print button.
document.addEventListener("click", function (event) {
  if (event.target.closest("[data-print]")) window.print();
});

// Before an idle sign-out (sessions.IdleSessionMiddleware), the page says so in time to stay
// (WCAG 2.2.1): nothing warned, and results typed on a tablet were lost with the session.
// The server counts a request as activity unless it is a page's own refresh; so does this.
(function () {
  var box, timer, before, ends = 0;
  // The session is the browser's, not the tab's: each tab tells the others when it ends (a
  // page left open in one tab warned, or said "signed out", while another was in use).
  var SHARED = "bloomops.session-ends";

  function share() {
    try { window.localStorage.setItem(SHARED, String(ends)); } catch (e) { /* private mode */ }
  }

  function shared() {
    try { return Number(window.localStorage.getItem(SHARED)) || 0; } catch (e) { return 0; }
  }

  // another tab's activity moved the end later: this tab's warning is not due yet
  function later(other) {
    // once this tab has said the session ended, it stays said (its sign-in link is there)
    if (!box || !(other > ends) || box.querySelector("[data-still-here]").hidden) return;
    ends = other;
    if (Date.now() < ends - lead()) box.hidden = true;
  }

  function idleSeconds() {
    return Number(document.body && document.body.getAttribute("data-idle-seconds")) || 0;
  }

  function left() {
    var s = Math.max(0, Math.round((ends - Date.now()) / 1000));
    return s >= 60 ? "in " + Math.ceil(s / 60) + " min" : "in " + s + " s";
  }

  // how long before the end the warning comes: two minutes, or a quarter of a short time
  function lead() {
    return Math.min(120, idleSeconds() / 4) * 1000;
  }

  function tick() {
    if (!box) return;
    later(shared());
    var now = Date.now();
    if (now >= ends) {
      var text = document.getElementById("idle-warning-text");
      text.textContent = text.getAttribute("data-ended");
      box.querySelector("[data-still-here]").hidden = true;
      box.querySelector("[data-idle-signin]").hidden = false;
      box.hidden = false;
      return;
    }
    if (now >= ends - lead()) {
      var opening = box.hidden;
      box.querySelector("[data-idle-left]").textContent = left();
      box.hidden = false;
      if (opening) {
        before = document.activeElement;
        box.querySelector("[data-still-here]").focus();
      }
    }
    timer = window.setTimeout(tick, 1000);
  }

  function active() {
    var idle = idleSeconds();
    if (!idle || !box) return;
    ends = Date.now() + idle * 1000;
    share();
    box.hidden = true;
    window.clearTimeout(timer);
    timer = window.setTimeout(tick, 1000);
  }

  window.addEventListener("storage", function (event) {
    if (event.key === SHARED) later(Number(event.newValue) || 0);
  });

  document.addEventListener("DOMContentLoaded", function () {
    box = document.getElementById("idle-warning");
    active();
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var config = event.detail && event.detail.requestConfig;
    var headers = (config && config.headers) || {};
    if (!headers["X-Bloomops-Poll"] && event.detail.successful) active();
  });
  function stay(button) {
    fetch(button.getAttribute("data-still-here"), { credentials: "same-origin" })
      .then(function (response) {
        if (response.ok && !response.redirected) {
          var back = box.hidden ? null : before;
          active();
          if (back && back.focus) back.focus();
        } else {
          ends = 0;
          tick();
        }
      })
      .catch(function () {});  // no answer (the network): the warning stays, to try again
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-still-here]");
    if (button) stay(button);
  });
  // typing results into a form is a person at work, though nothing is sent yet: near the
  // end it keeps the session, rather than the warning taking the focus from the field
  document.addEventListener("input", function (event) {
    if (!box || !ends || !event.target.closest("form")) return;
    if (Date.now() >= ends - lead() && Date.now() < ends) {
      stay(box.querySelector("[data-still-here]"));
    }
  });
})();

// My work: results typed on a card are kept in the tab until its Complete is sent, so a
// Renew (or any other form of the page, or a reload) does not empty them: a scientist
// renews exactly when half-way through typing. What the server gives back (a refusal's
// words, filled in) is left as it is; a field already filled is never overwritten.
(function () {
  function key(field) {
    var item = field.closest(".work-item[data-lease]");
    return item ? "bloomops-typed|" + item.dataset.lease + "|" + field.name : null;
  }

  function results(root) {
    return root.querySelectorAll('.work-item form.complete [name^="result."]');
  }

  document.addEventListener("input", function (event) {
    var field = event.target;
    if (!field.name || field.name.indexOf("result.") !== 0 || !key(field)) return;
    try {
      window.sessionStorage.setItem(key(field), field.value);
    } catch (e) { /* storage full or off: nothing kept, as before */ }
  });
  document.addEventListener("change", function (event) {
    var field = event.target;
    if (field.type !== "radio" || !field.checked || field.name.indexOf("result.") !== 0) return;
    try { window.sessionStorage.setItem(key(field), field.value); } catch (e) { /* off */ }
  });

  // a claim no longer held (completed, failed, released, ended): what was typed for it is
  // given up; one still held keeps it, whatever became of the form sent (the network lost
  // it, a sign-in came between), and the card is filled again
  function forget() {
    var held = document.getElementById("my-work-held");
    if (!held) return;
    var leases = held.dataset.held ? held.dataset.held.split(",") : [];
    try {
      // the keys first: a removal reorders the rest (one of a card's two fields was kept)
      var keys = [];
      for (var i = 0; i < window.sessionStorage.length; i += 1) {
        keys.push(window.sessionStorage.key(i));
      }
      keys.forEach(function (k) {
        if (k && k.indexOf("bloomops-typed|") === 0 &&
            leases.indexOf(k.split("|")[1]) < 0) window.sessionStorage.removeItem(k);
      });
    } catch (e) { /* storage off: nothing kept */ }
  }

  document.addEventListener("DOMContentLoaded", function () {
    forget();
    var filled = {};
    results(document).forEach(function (field) {
      if ((field.type === "radio" && field.checked) || (field.type !== "radio" && field.value)) {
        filled[key(field)] = true;
      }
    });
    results(document).forEach(function (field) {
      var k = key(field);
      var kept;
      try { kept = window.sessionStorage.getItem(k); } catch (e) { return; }
      if (kept === null || filled[k]) return;
      if (field.type === "radio") field.checked = field.value === kept;
      else field.value = kept;
    });
  });

})();
