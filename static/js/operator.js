// Operator controls (inspector, workbench, workers, admin): a destructive action asks first.
// A form (or the button that submits it) carries data-confirm, the consequence in plain
// words; before anything is sent, a <dialog> shows it with the reason typed, and only
// "Yes" sends the form, once; data-confirm-when (a CSS selector) asks only when the form
// holds a match. Without this script the form posts directly and the server
// still demands the reason. Built here: the Content-Security-Policy forbids inline script.
(function () {
  var dialog = null;
  var pending = null;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text) node.textContent = text;
    return node;
  }

  function build() {
    dialog = el("dialog", { id: "confirm-dialog", "aria-labelledby": "confirm-title",
                            "aria-describedby": "confirm-consequence" });
    var title = el("h2", { id: "confirm-title" });
    var consequence = el("p", { id: "confirm-consequence" });
    var reason = el("p", { id: "confirm-reason" });
    var buttons = el("div", { class: "confirm-buttons" });
    var back = el("button", { type: "button", id: "confirm-back" }, "Go back");
    var yes = el("button", { type: "button", id: "confirm-yes", class: "danger" });
    buttons.append(back, yes);
    dialog.append(title, consequence, reason, buttons);
    document.body.append(dialog);
    back.addEventListener("click", function () { dialog.close(); });
    dialog.addEventListener("close", function () {
      if (pending && !pending.sent) pending.submitter && pending.submitter.focus();
      if (pending && !pending.sent) pending = null;
    });
    yes.addEventListener("click", function () {
      if (!pending || pending.sent) return;
      pending.sent = true;  // one send, however often "Yes" is pressed
      yes.disabled = true;
      pending.form.dataset.confirmed = "1";
      dialog.close();
      pending.form.requestSubmit(pending.submitter || undefined);
    });
  }

  function picked(form) {
    if (!form.id) return 0;
    return document.querySelectorAll('input[name="pick"][form="' + form.id + '"]:checked').length;
  }

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var submitter = event.submitter || null;
    var own = submitter && submitter.dataset.confirm;
    var text = own || form.dataset.confirm;
    // data-confirm-also (with -label, and -when: selectors joined by "|", each found in the
    // form as it is sent): another question, asked instead when it applies (a QC recorded
    // as fail sent on to the next step). Plain selectors, no :has(), which an older browser
    // at an instrument cannot read (and a selector it cannot read asks rather than not).
    var also = false;
    if (!own && form.dataset.confirmAlso && form.dataset.confirmAlsoWhen) {
      try {
        also = form.dataset.confirmAlsoWhen.split("|").every(function (selector) {
          return form.querySelector(selector) !== null;
        });
      } catch (e) { also = true; }
    }
    if (also) {
      text = form.dataset.confirmAlso;
    } else if (!own && form.dataset.confirmWhen &&
               !form.querySelector(form.dataset.confirmWhen)) {
      // data-confirm-when: the form's question is asked only when something in the form, as
      // it is sent, matches (the flow's end chosen as the next queue; a sign-in unticked)
      return;
    }
    if (!text) return;
    if (form.dataset.confirmed === "1") {  // confirmed: this is the one send
      delete form.dataset.confirmed;
      return;
    }
    // {count} only on a form of picked rows: a subject or token named "{count}" elsewhere
    // is its name, and must not turn the question off
    var count = picked(form);
    if (text.indexOf("{count}") >= 0 && form.id &&
        document.querySelector('input[name="pick"][form="' + form.id + '"]')) {
      if (count === 0) {
        // said here, the reason typed kept (the server's answer came back without it, and
        // did not say which of the page's lists it meant)
        event.preventDefault();
        var none = form.querySelector(".none-picked");
        if (!none) {
          none = document.createElement("p");
          none.className = "none-picked";
          none.setAttribute("role", "alert");
          form.append(none);
        }
        none.textContent = "Nothing is selected: tick the rows to act on first.";
        var first = document.querySelector('input[name="pick"][form="' + form.id + '"]');
        if (first) first.focus();
        return;
      }
      text = text.split("{count}").join(String(count));
    }
    // {name}: data-confirm-part-name's sentence when its -when selector finds a match in the
    // form as it is sent, else nothing (a Save that took sign-in away named the bench role's
    // loss too)
    Object.keys(form.dataset).forEach(function (key) {
      if (key.indexOf("confirmPart") !== 0 || /When$/.test(key)) return;
      var when = form.dataset[key + "When"], on = true;
      try { on = !when || form.querySelector(when) !== null; } catch (e) { on = true; }
      var name = "{" + key.slice("confirmPart".length).toLowerCase() + "}";
      text = text.split(name).join(on ? form.dataset[key] : "");
    });
    // {queue}: the queue chosen in the form's queue list, as the list names it.
    var queueList = form.querySelector('select[name="queue_key"]');
    if (text.indexOf("{queue}") >= 0 && queueList && queueList.selectedIndex >= 0) {
      text = text.split("{queue}").join(queueList.options[queueList.selectedIndex].text);
    }
    // {next}: the next queue chosen in the form's list, as the list names it.
    var nextList = form.querySelector('select[name="next_queue_key"]');
    if (text.indexOf("{next}") >= 0 && nextList && nextList.selectedIndex >= 0) {
      text = text.split("{next}").join(nextList.options[nextList.selectedIndex].text);
    }
    // {after}: what becomes of the item, as the chosen option of the form's list says it
    // (a failure's class decides whether it is tried again or goes to the dead letters).
    var chosen = form.querySelector("select option:checked[data-after]");
    if (text.indexOf("{after}") >= 0 && chosen) {
      text = text.split("{after}").join(chosen.dataset.after);
    }
    event.preventDefault();
    if (!dialog) build();
    // The action in words: data-confirm-label where the button's text alone is ambiguous
    // ("Cancel" beside "Go back").
    var label = (also && form.dataset.confirmAlsoLabel) ||
      (submitter && submitter.dataset.confirmLabel) || form.dataset.confirmLabel ||
      (submitter && submitter.textContent.trim()) || "Confirm";
    // a failure's words are its reason ("What went wrong")
    var reasonField = form.querySelector('[name="reason"], [name="error_message"]') ||
      (form.id && document.querySelector('[name="reason"][form="' + form.id + '"]'));
    var codeField = form.querySelector('[name="hold_code"]');
    dialog.querySelector("#confirm-title").textContent = label + "?";
    dialog.querySelector("#confirm-consequence").textContent = text;
    var why = reasonField ? reasonField.value.trim() : "";
    var code = codeField && submitter && submitter.value === "hold" ? codeField.value + ": " : "";
    // a form that asks no reason (sign out) says nothing about one
    var reasonLine = dialog.querySelector("#confirm-reason");
    reasonLine.hidden = !reasonField;
    // what will be recorded once confirmed (a refusal after it says it was not)
    reasonLine.textContent = why ? "Reason to be recorded: " + code + why : "No reason given.";
    var yes = dialog.querySelector("#confirm-yes");
    yes.textContent = "Yes, " + label.charAt(0).toLowerCase() + label.slice(1);
    yes.disabled = false;
    pending = { form: form, submitter: submitter, sent: false };
    dialog.showModal();
    dialog.querySelector("#confirm-back").focus();
  });

  // Select all: a header checkbox (data-select-all="<form id>") ticks every row of that form.
  function rows(form) {
    return document.querySelectorAll('input[name="pick"][form="' + form + '"]');
  }
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target.matches("[data-select-all]")) {
      rows(target.dataset.selectAll).forEach(function (box) { box.checked = target.checked; });
      return;
    }
    if (target.matches('input[name="pick"][form]')) {
      var all = document.querySelector('[data-select-all="' + target.getAttribute("form") + '"]');
      if (!all) return;
      var boxes = Array.from(rows(target.getAttribute("form")));
      var on = boxes.filter(function (b) { return b.checked; }).length;
      all.checked = on === boxes.length;
      all.indeterminate = on > 0 && on < boxes.length;
    }
  });
})();
