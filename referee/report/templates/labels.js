(function () {
  "use strict";
  document.body.setAttribute("data-js", "on");
  var root = document.getElementById("labelling");
  var items = Array.prototype.slice.call(document.querySelectorAll("section.item"));
  var status = document.getElementById("label-status");
  var count = document.getElementById("labelled-count");
  var current = 0;
  // Start at the first result nobody has labelled yet.
  for (var i = 0; i < items.length; i += 1) {
    if (!items[i].getAttribute("data-label")) { current = i; break; }
  }

  function show(n) {
    if (!items.length) { return; }
    current = Math.max(0, Math.min(items.length - 1, n));
    items.forEach(function (item, k) { item.classList.toggle("current", k === current); });
    items[current].scrollIntoView({block: "nearest"});
    document.body.setAttribute("data-current", String(current));
  }

  function counted() {
    var n = items.filter(function (item) { return item.getAttribute("data-label"); }).length;
    count.textContent = n + " of " + items.length + " labelled";
  }

  function save(change) {
    var item = items[current];
    if (!item) { return; }
    var body = {
      case_id: item.getAttribute("data-case"),
      criterion: item.getAttribute("data-criterion"),
      comment: item.querySelector("textarea.comment").value
    };
    // A label line is the whole verdict in force: what was said before is carried along.
    if (item.getAttribute("data-verdict")) { body.verdict = item.getAttribute("data-verdict"); }
    if (item.getAttribute("data-human")) { body.human = item.getAttribute("data-human"); }
    Object.keys(change).forEach(function (key) { body[key] = change[key]; });
    status.textContent = "saving…";
    fetch(root.getAttribute("data-post"), {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-Referee-Token": root.getAttribute("data-token")},
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.json().then(function (answer) {
        if (!response.ok) { throw new Error(answer.error || ("HTTP " + response.status)); }
        return answer;
      });
    }).then(function (answer) {
      item.setAttribute("data-label", answer.summary);
      item.setAttribute("data-verdict", answer.verdict || "");
      item.setAttribute("data-human", answer.human || "");
      item.querySelector(".label-text").textContent = answer.text;
      status.textContent = "saved: " + answer.text;
      counted();
      if (change.verdict || change.human) { show(current + 1); }
    }).catch(function (error) {
      status.textContent = "not saved: " + error.message;
    });
  }

  document.addEventListener("keydown", function (event) {
    var inComment = event.target && event.target.classList && event.target.classList.contains("comment");
    if (inComment) {
      if (event.key === "Escape") { event.target.blur(); }
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        event.target.blur();
        save({});
      }
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey) { return; }
    var key = event.key;
    if (key === "j" || key === "ArrowDown") { show(current + 1); }
    else if (key === "k" || key === "ArrowUp") { show(current - 1); }
    else if (key === "y") { save({verdict: "right"}); }
    else if (key === "n") { save({verdict: "wrong"}); }
    else if (key === "p") { save({human: "pass"}); }
    else if (key === "f") { save({human: "fail"}); }
    else if (key === "c" && items[current]) {
      event.preventDefault();
      items[current].querySelector("textarea.comment").focus();
    } else { return; }
    event.preventDefault();
  });
  items.forEach(function (item, k) {
    item.addEventListener("click", function () { show(k); });
  });
  show(current);
}());
