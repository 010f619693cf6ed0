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

  function select(filter) {
    var found = false;
    buttons.forEach(function (o) {
      var on = o.getAttribute("data-filter") === filter;
      found = found || on;
      o.setAttribute("aria-pressed", String(on));
    });
    active = found ? filter : "all";
    if (!found) { buttons[0].setAttribute("aria-pressed", "true"); }
  }

  // The view lives in the URL fragment (#filter=failed&q=refund) so it can be linked to.
  function remember() {
    var parts = [];
    if (active !== "all") { parts.push("filter=" + encodeURIComponent(active)); }
    if (search.value) { parts.push("q=" + encodeURIComponent(search.value)); }
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", parts.length ? "#" + parts.join("&") : window.location.pathname);
    }
  }

  function restore() {
    var params = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
      var i = pair.indexOf("=");
      if (i > 0) {
        try { params[pair.slice(0, i)] = decodeURIComponent(pair.slice(i + 1)); } catch (e) { /* ignore a malformed fragment */ }
      }
    });
    select(params.filter || "all");
    search.value = params.q || "";
  }

  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      select(b.getAttribute("data-filter"));
      apply();
      remember();
    });
  });
  search.addEventListener("input", function () { apply(); remember(); });
  document.getElementById("expand").addEventListener("click", function () {
    cases.forEach(function (c) { if (!c.hidden) { c.open = true; } });
  });
  document.getElementById("collapse").addEventListener("click", function () {
    cases.forEach(function (c) { c.open = false; });
  });
  restore();
  body.setAttribute("data-js", "on");
  apply();
})();
