// RCLL web screens: the only script. Everything works without it; it adds
//  - keyboard shortcuts: a button with data-key="m" is pressed by the key m
//    (dedup review: m = merge, k = keep the first proposal), unless typing in a field;
//  - a gentle reload of pages marked data-refresh="<seconds>" (a running job);
//  - "tick all": a button data-tick-all="name" ticks the checkboxes of that name.
document.addEventListener("keydown", function (ev) {
  if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
  var t = ev.target;
  if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
  var button = document.querySelector('[data-key="' + CSS.escape(ev.key) + '"]');
  if (button) { ev.preventDefault(); button.click(); }
});
document.addEventListener("DOMContentLoaded", function () {
  var el = document.querySelector("[data-refresh]");
  if (el) {
    var s = parseFloat(el.getAttribute("data-refresh")) || 2;
    setTimeout(function () { window.location.reload(); }, s * 1000);
  }
});
document.addEventListener("click", function (ev) {
  // a button data-tick-all="name" ticks every checkbox of that name (bulk decisions)
  var b = ev.target.closest && ev.target.closest("[data-tick-all]");
  if (!b) return;
  document.querySelectorAll('input[type=checkbox][name="' + CSS.escape(b.getAttribute("data-tick-all")) + '"]')
    .forEach(function (c) { c.checked = true; });
});
