(function () {
  "use strict";
  var body = document.body;
  var cases = Array.prototype.slice.call(document.querySelectorAll("details.case"));
  var search = document.getElementById("search");
  var shown = document.getElementById("shown");
  var buttons = Array.prototype.slice.call(document.querySelectorAll("button[data-filter]"));
  var active = "all";
  var texts = null;

  function apply() {
    var query = search.value.trim().toLowerCase();
    if (query && texts === null) {
      // Built once, on first search: reading textContent of every case per keystroke is slow.
      texts = cases.map(function (c) { return c.textContent.toLowerCase(); });
    }
    var visible = 0;
    cases.forEach(function (c, i) {
      var ok = (active === "all" || c.getAttribute("data-group") === active) &&
        (!query || texts[i].indexOf(query) !== -1);
      c.hidden = !ok;
      if (ok) { visible += 1; }
    });
    shown.textContent = visible + " of " + cases.length + " case(s) shown";
  }

  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      active = b.getAttribute("data-filter");
      buttons.forEach(function (o) { o.setAttribute("aria-pressed", String(o === b)); });
      apply();
    });
  });
  search.addEventListener("input", apply);
  document.getElementById("expand").addEventListener("click", function () {
    cases.forEach(function (c) { if (!c.hidden) { c.open = true; } });
  });
  document.getElementById("collapse").addEventListener("click", function () {
    cases.forEach(function (c) { c.open = false; });
  });
  body.setAttribute("data-js", "on");
  apply();
})();
