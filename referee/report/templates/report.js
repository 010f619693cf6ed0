(function () {
  "use strict";
  var body = document.body;
  var cases = Array.prototype.slice.call(document.querySelectorAll("details.case"));
  var table = document.getElementById("case-table");
  var rows = table ? Array.prototype.slice.call(table.tBodies[0].rows) : [];
  var search = document.getElementById("search");
  var shown = document.getElementById("shown");
  var criterion = document.getElementById("criterion");
  var outcome = document.getElementById("outcome");
  var buttons = Array.prototype.slice.call(document.querySelectorAll("button[data-filter]"));
  var active = "all";
  var texts = null;
  var sorting = null;  // {column: n, ascending: bool} once a header was clicked
  var more = document.getElementById("more");
  var page = table && table.getAttribute("data-page") ? Number(table.getAttribute("data-page")) : 0;
  var limit = page || Infinity;  // how many matching cases are listed now
  var inflated = {};   // chunk id -> Promise, for reports whose case details ship compressed
  var compressed = document.querySelector("script[type='application/gzip']") !== null;

  // base64 gzip text (html.py's _packed) inflated with the browser's own DecompressionStream;
  // labels.js unpacks the labelling panel's rows of a large report with it too.
  function unpack(text) {
    var binary = atob(text.trim());
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i += 1) { bytes[i] = binary.charCodeAt(i); }
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
  }
  window.refereeUnpack = unpack;

  // A large report carries its case details as gzip blocks; a block is inflated the first time
  // one of its cases is needed.
  function inflate(chunk) {
    if (chunk === null || chunk === undefined) { return Promise.resolve(); }
    if (!inflated[chunk]) {
      inflated[chunk] = unpack(document.getElementById("bodies-" + chunk).textContent).then(function (markup) {
        var holder = document.createElement("template");
        holder.innerHTML = markup;
        Array.prototype.slice.call(holder.content.querySelectorAll("div.body[data-for]")).forEach(function (b) {
          var target = document.getElementById("case-" + b.getAttribute("data-for"));
          if (target) { target.appendChild(b); }
        });
        texts = null;
      });
    }
    return inflated[chunk];
  }

  function inflateAll() {
    var ids = {};
    cases.forEach(function (c) { if (c.hasAttribute("data-chunk")) { ids[c.getAttribute("data-chunk")] = true; } });
    return Promise.all(Object.keys(ids).map(inflate));
  }

  function chunkOf(el) { return el.hasAttribute("data-chunk") ? el.getAttribute("data-chunk") : null; }

  // A case's outcome on the chosen criterion, by column: "passed failed error skipped none".
  function criterionMatches(el) {
    if (!criterion || criterion.value === "") { return true; }
    var outcomes = (el.getAttribute("data-outcomes") || "").split(" ");
    return outcomes[Number(criterion.value)] === outcome.value;
  }

  function apply() {
    var query = search.value.trim().toLowerCase();
    if (query && compressed && Object.keys(inflated).length < document.querySelectorAll("script[type='application/gzip']").length) {
      shown.textContent = "searching…";
      inflateAll().then(apply);
      return;
    }
    if (query && texts === null) {
      // Built once, on first search: reading textContent of every case per keystroke is slow.
      texts = {};
      cases.forEach(function (c) { texts[c.getAttribute("data-case")] = c.textContent.toLowerCase(); });
    }
    var keep = {};
    var visible = 0;
    cases.forEach(function (c) {
      var key = c.getAttribute("data-case");
      var ok = (active === "all" || c.getAttribute("data-group") === active) &&
        criterionMatches(c) && (!query || texts[key].indexOf(query) !== -1);
      // A large run lists the first `limit` matches; "show more" lists more.
      c.hidden = !ok || visible >= limit;
      keep[key] = ok;
      if (ok) { visible += 1; }
    });
    var listed = 0;
    (table ? Array.prototype.slice.call(table.tBodies[0].rows) : []).forEach(function (r) {
      var ok = keep[r.getAttribute("data-case")];
      r.hidden = !ok || listed >= limit;
      if (ok) { listed += 1; }
    });
    // Counted as listed: a page of a large run is `limit` rows, not every match.
    shown.textContent = (visible > limit ? limit + " of " + visible + " matching"
                         : visible + " of " + cases.length) + " case(s) shown";
    if (more) {
      more.hidden = visible <= limit;
      more.textContent = "show " + Math.min(page, Math.max(0, visible - limit)) + " more of " + (visible - limit);
    }
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

  // The view lives in the URL fragment (#filter=failed&q=refund&crit=0&outcome=failed) so it
  // can be linked to; #case-N opens and shows case N.
  function remember() {
    var parts = [];
    if (active !== "all") { parts.push("filter=" + encodeURIComponent(active)); }
    if (search.value) { parts.push("q=" + encodeURIComponent(search.value)); }
    if (criterion && criterion.value !== "") {
      parts.push("crit=" + encodeURIComponent(criterion.value));
      parts.push("outcome=" + encodeURIComponent(outcome.value));
    }
    if (sorting) { parts.push("sort=" + sorting.column + "&order=" + (sorting.ascending ? "asc" : "desc")); }
    if (window.history && window.history.replaceState) {
      window.history.replaceState(null, "", parts.length ? "#" + parts.join("&") : window.location.pathname);
    }
  }

  function openCase(hash) {
    var match = /^#case-(\d+)$/.exec(hash);
    if (!match) { return false; }
    var target = document.getElementById("case-" + match[1]);
    if (!target) { return false; }
    inflate(chunkOf(target)).then(function () {
      target.hidden = false;
      var row = table ? table.querySelector('tr[data-case="' + match[1] + '"]') : null;
      if (row) { row.hidden = false; }
      target.open = true;
      target.scrollIntoView();
    });
    return true;
  }

  function restore() {
    if (openCase(window.location.hash)) { return; }
    var params = {};
    window.location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
      var i = pair.indexOf("=");
      if (i > 0) {
        try { params[pair.slice(0, i)] = decodeURIComponent(pair.slice(i + 1)); } catch (e) { /* ignore a malformed fragment */ }
      }
    });
    select(params.filter || "all");
    search.value = params.q || "";
    if (criterion && params.crit !== undefined && criterion.querySelector('option[value="' + Number(params.crit) + '"]')) {
      criterion.value = String(Number(params.crit));
      if (["passed", "failed", "error", "skipped"].indexOf(params.outcome) !== -1) { outcome.value = params.outcome; }
    }
    var headers = table ? table.tHead.rows[0].cells : [];
    var column = Number(params.sort);
    if (params.sort !== undefined && column >= 0 && column < headers.length && column === Math.floor(column)) {
      sortBy(headers[column], params.order !== "desc");
    }
  }

  function sortBy(th, ascending) {
    var column = Array.prototype.indexOf.call(th.parentNode.children, th);
    var numeric = th.getAttribute("data-sort") === "num";
    sorting = {column: column, ascending: ascending};
    Array.prototype.forEach.call(th.parentNode.children, function (other) { other.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var sorted = rows.slice().sort(function (a, b) {
      var x = a.cells[column].getAttribute("data-v");
      var y = b.cells[column].getAttribute("data-v");
      var order = numeric ? Number(x) - Number(y) : x.localeCompare(y);
      if (order === 0) { order = Number(a.getAttribute("data-case")) - Number(b.getAttribute("data-case")); }
      return ascending ? order : -order;
    });
    var tbody = table.tBodies[0];
    sorted.forEach(function (r) { tbody.appendChild(r); });
  }

  buttons.forEach(function (b) {
    b.addEventListener("click", function () {
      select(b.getAttribute("data-filter"));
      apply();
      remember();
    });
  });
  search.addEventListener("input", function () { apply(); remember(); });
  [criterion, outcome].forEach(function (el) {
    if (el) { el.addEventListener("change", function () { apply(); remember(); }); }
  });
  if (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
      th.addEventListener("click", function () {
        sortBy(th, th.getAttribute("aria-sort") !== "ascending");
        apply();
        remember();
      });
    });
  }
  window.addEventListener("hashchange", function () { openCase(window.location.hash); });
  if (more) {
    more.addEventListener("click", function () { limit += page; apply(); });
  }
  document.getElementById("expand").addEventListener("click", function () {
    cases.forEach(function (c) {
      if (!c.hidden) { inflate(chunkOf(c)).then(function () { c.open = true; }); }
    });
  });
  cases.forEach(function (c) {
    if (c.hasAttribute("data-chunk")) {
      c.addEventListener("toggle", function () { if (c.open) { inflate(chunkOf(c)); } });
    }
  });
  document.getElementById("collapse").addEventListener("click", function () {
    cases.forEach(function (c) { c.open = false; });
  });
  restore();
  body.setAttribute("data-js", "on");
  apply();
  // How long the page took to be ready, laid out, from navigation start (benchmarks read it).
  window.addEventListener("load", function () {
    void body.offsetHeight;
    body.setAttribute("data-ready-ms", String(Math.round(window.performance.now())));
  });
})();
