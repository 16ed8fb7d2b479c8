// A "select all" checkbox (data-select-all="FORM_ID") ticks every pick of that form; the
// box itself shows mixed when only some are ticked.
(function () {
  "use strict";
  function picks(formId) {
    return Array.from(document.querySelectorAll('input[type=checkbox][name=pick][form="' + formId + '"]'));
  }
  document.addEventListener("change", function (event) {
    var box = event.target;
    if (box.matches && box.matches("input[data-select-all]")) {
      picks(box.dataset.selectAll).forEach(function (p) { p.checked = box.checked; });
      return;
    }
    if (box.name === "pick" && box.getAttribute("form")) {
      var all = document.querySelector('input[data-select-all="' + box.getAttribute("form") + '"]');
      if (!all) { return; }
      var list = picks(box.getAttribute("form"));
      var ticked = list.filter(function (p) { return p.checked; }).length;
      all.checked = ticked === list.length;
      all.indeterminate = ticked > 0 && ticked < list.length;
    }
  });
})();
