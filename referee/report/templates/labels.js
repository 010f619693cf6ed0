(function () {
  "use strict";
  // Labelling verdicts by keyboard, on two pages: the viewer's labelling page, which stores each
  // label through the viewer (data-post, with its per-session token), and the self-contained
  // report's panel (data-store="local"), which keeps labels in the browser's local storage under
  // the run id and downloads them as the rows `referee labels export` writes (a case's images
  // and PDFs by hash, their bytes left in the run's blobs folder). Both pages carry
  // the queue (labels/_review.queue_items, in review order) as JSON; this script builds its
  // sections, text only.
  var root = document.getElementById("labelling");
  if (!root) { return; }
  document.body.setAttribute("data-js", "on");
  var local = root.getAttribute("data-store") === "local";
  var panel = document.getElementById("label-panel");  // the report's; the viewer's page is all labelling
  var status = document.getElementById("label-status");
  var count = document.getElementById("labelled-count");
  var items = [];
  var current = 0;
  var loading = null;   // Promise of the page's queue, read once
  var rows = {};        // case id -> the case part of a labels row (labels/_export.case_fields)
  var blobs = "";       // the run's blobs folder, where the rows' images and PDFs are kept

  function loadQueue() {
    if (!loading) {
      var block = document.getElementById("label-data");
      var text = block.hasAttribute("data-packed") ? window.refereeUnpack(block.textContent)
        : Promise.resolve(block.textContent);
      loading = text.then(function (json) { return JSON.parse(json); });
    }
    return loading;
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) { node.className = className; }
    if (text !== undefined) { node.textContent = text; }
    return node;
  }

  function fixed(number) { return typeof number === "number" ? number.toFixed(3) : "none"; }

  function fieldText(value) { return typeof value === "string" ? value : JSON.stringify(value, null, 2); }

  // One queue entry as a section (the attributes the rest of the script and the tests read).
  function build(it, i) {
    var section = el("section", "item");
    section.id = "item-" + i;
    var data = {i: String(i), "case": it.case_id, criterion: it.criterion,
                "judge-passed": it.passed ? "true" : "false", "judge-score": String(it.score),
                label: it.label || "", verdict: it.verdict || "", human: it.human || ""};
    Object.keys(data).forEach(function (key) { section.setAttribute("data-" + key, data[key]); });
    var head = el("h2", "", (i + 1) + ". ");
    if (root.getAttribute("data-case-links")) {
      var link = el("a", "", it.case_name);
      link.href = "#case-" + it.case_index;
      head.appendChild(link);
    } else {
      head.appendChild(document.createTextNode(it.case_name));
    }
    head.appendChild(document.createTextNode(" — " + it.criterion + " "));
    head.appendChild(el("span", "why muted", "(" + it.why + ")"));
    section.appendChild(head);
    var meta = el("div", "meta");
    var verdict = el("span", "", "judge: ");
    verdict.appendChild(el("b", "", it.passed ? "pass" : "fail"));
    meta.appendChild(verdict);
    meta.appendChild(el("span", "", "score " + fixed(it.score) + " (threshold " + fixed(it.threshold) + ")"));
    if (it.unknown) { meta.appendChild(el("span", "", it.unknown + " UNKNOWN")); }
    if (it.error) { meta.appendChild(el("span", "", "error: " + it.error)); }
    section.appendChild(meta);
    if (it.reason) { section.appendChild(el("p", "reason", it.reason)); }
    var fields = el("div", "fields");
    (it.fields || []).forEach(function (pair) { addField(fields, pair[0], pair[1]); });
    section.appendChild(fields);
    if (it.media && it.media.length) { section.appendChild(gallery(it.media)); }
    var line = el("p", "", "label: ");
    line.appendChild(el("span", "label-text", it.label_text || "none yet"));
    section.appendChild(line);
    var comment = el("textarea", "comment");
    comment.rows = 2;
    comment.cols = 80;
    comment.setAttribute("aria-label", "comment");
    comment.value = it.comment || "";
    section.appendChild(comment);
    return section;
  }

  function addField(box, name, value, leftOut) {
    if (value === null || value === undefined) { return; }
    var field = el("div", "field");
    field.appendChild(el("b", "", name));
    // Cut as the case details below cut it (labels/_review.py report_labelling).
    field.appendChild(el("pre", "", fieldText(value) + (leftOut ? "\n… " + leftOut + " more character(s) not shown" : "")));
    box.appendChild(field);
  }

  // A case's images as thumbnails (inline data: images only) and links to the stored files
  // (content/_gallery.py builds the list).
  function gallery(media) {
    var box = el("div", "media");
    media.forEach(function (m) {
      var figure = el("figure", "media m-" + m.kind);
      if (m.src && /^data:image\/(png|jpeg);base64,/.test(m.src)) {
        var img = document.createElement("img");
        img.src = m.src;
        img.alt = m.where + ": " + m.label;
        figure.appendChild(img);
      }
      var caption = el("figcaption", "", m.where + ": ");
      if (m.href && /^(\/run\/|blobs\/)/.test(m.href)) {
        var link = el("a", "", m.label);
        link.href = m.href;
        caption.appendChild(link);
      } else {
        caption.appendChild(document.createTextNode(m.label));
      }
      if (m.note) { caption.appendChild(el("span", "muted", " " + m.note)); }
      figure.appendChild(caption);
      box.appendChild(figure);
    });
    return box;
  }

  // The report shows a result's case from its row, when the result is first shown.
  function fill(item) {
    var box = item.querySelector(".fields");
    var fields = rows[item.getAttribute("data-case")];
    if (!local || box.childElementCount || !fields) { return; }
    [["input", "input"], ["context", "context"], ["expected output", "expected_output"], ["output", "output"]].forEach(function (pair) {
      addField(box, pair[0], fields[pair[1]], (fields.cut_fields || {})[pair[1]]);
    });
  }

  // The report's store ------------------------------------------------------------------------
  var runId = root.getAttribute("data-run-id");
  var storeKey = "referee-labels:" + runId;
  var storage = null;
  var saved = {};       // "case id\ncriterion" -> label, as labels.jsonl keeps one (labels/_store.py)
  var labellerInput = document.getElementById("labeller");
  var download = document.getElementById("download-labels");
  if (local) {
    try {
      storage = window.localStorage;
      storage.setItem("referee-probe", "1");
      storage.removeItem("referee-probe");
      saved = JSON.parse(storage.getItem(storeKey) || "{}") || {};
      labellerInput.value = storage.getItem("referee-labeller") || "";
    } catch (error) {  // file:// pages in some browsers, sandboxed frames, storage turned off
      storage = null;
      document.getElementById("label-storage-off").hidden = false;
    }
    labellerInput.addEventListener("change", function () {
      if (storage) { try { storage.setItem("referee-labeller", labellerInput.value.trim()); } catch (e) { /* kept in memory */ } }
    });
  }

  function keyOf(item) { return item.getAttribute("data-case") + "\n" + item.getAttribute("data-criterion"); }

  // The words of labels/_review.py's describe(), for a label made in the browser.
  function describe(label) {
    var parts = [];
    if (label.verdict) { parts.push("judge " + label.verdict); }
    if (label.human) { parts.push("person says " + label.human); }
    if (label.comment) { parts.push("comment: " + label.comment); }
    var summary = (label.verdict || label.human) ? (label.verdict || "-") + "/" + (label.human || "-") : "";
    return {summary: summary, text: (parts.join("; ") || "no verdict") + " (" + (label.labeller || "unnamed") + ")",
            verdict: label.verdict || "", human: label.human || ""};
  }

  // The person's pass/fail, as Label.human_passed reads it.
  function humanPassed(label) {
    if (label.human) { return label.human === "pass"; }
    if (!label.verdict || label.judge_passed === null || label.judge_passed === undefined) { return null; }
    return label.verdict === "right" ? label.judge_passed : !label.judge_passed;
  }

  function keep() {
    if (!storage) { return; }
    try { storage.setItem(storeKey, JSON.stringify(saved)); } catch (error) {
      storage = null;
      document.getElementById("label-storage-off").hidden = false;
    }
  }

  // The rows of `referee labels export` (labels/_export.py), from the labels made here.
  function exportText() {
    var labels = items.map(function (item) { return saved[keyOf(item)]; }).filter(function (label) {
      return label && humanPassed(label) !== null && rows[label.case_id];
    });
    var criteria = {};
    labels.forEach(function (label) { criteria[label.criterion] = true; });
    var several = Object.keys(criteria).length > 1;
    return labels.map(function (label) {
      var fields = rows[label.case_id];
      var metadata = {run: root.getAttribute("data-run"), run_id: runId, case_id: label.case_id,
                      criterion: label.criterion, scoring: label.scoring};
      if (label.labeller) { metadata.labeller = label.labeller; }
      metadata.at = label.at;
      ["verdict", "human", "judge_passed", "judge_score"].forEach(function (key) {
        if (label[key] !== null && label[key] !== undefined && label[key] !== "") { metadata[key] = label[key]; }
      });
      if (label.comment) { metadata.comment = label.comment; }
      // Which fields the page cut: import accepts them, calibrate refuses to judge them.
      if (fields.cut_fields) { metadata.cut_fields = fields.cut_fields; }
      var row = {id: several ? label.case_id + "#" + label.criterion : label.case_id,
                 input: fields.input, output: fields.output,
                 label: humanPassed(label) ? "pass" : "fail", metadata: metadata};
      if ("context" in fields) { row.context = fields.context; }
      if ("expected_output" in fields) { row.expected_output = fields.expected_output; }
      // The images and PDFs the run's judge saw, by hash, and where their bytes are (the
      // run's blobs/): without them calibrate would replay another, text-only judge task.
      var media = false;
      ["media", "output_media"].forEach(function (key) {
        if (fields[key]) { row[key] = fields[key]; media = true; }
      });
      if (media && blobs) { row.blobs = blobs; }
      return JSON.stringify(row) + "\n";
    }).join("");
  }

  // A blob URL: megabytes of rows are not copied into a URL-encoded href at every label.
  function refreshDownload() {
    var text = exportText();
    if (download.href.indexOf("blob:") === 0) { URL.revokeObjectURL(download.href); }
    download.href = URL.createObjectURL(new Blob([text], {type: "application/x-ndjson"}));
    download.setAttribute("data-rows", String(text ? text.split("\n").length - 1 : 0));
    return text;
  }

  function storeLocally(item, body) {
    var label = {case_id: body.case_id, criterion: body.criterion,
                 scoring: Number(root.getAttribute("data-scoring")),
                 verdict: body.verdict || null, human: body.human || null, comment: body.comment || "",
                 judge_passed: item.getAttribute("data-judge-passed") === "true",
                 judge_score: item.getAttribute("data-judge-score") === "null" ? null
                   : Number(item.getAttribute("data-judge-score")),
                 labeller: labellerInput.value.trim(), at: Date.now() / 1000};
    saved[keyOf(item)] = label;
    keep();
    refreshDownload();
    return Promise.resolve(describe(label));
  }

  // The viewer's store -------------------------------------------------------------------------
  function storeOnServer(item, body) {
    return fetch(root.getAttribute("data-post"), {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-Referee-Token": root.getAttribute("data-token")},
      body: JSON.stringify(body)
    }).then(function (response) {
      return response.json().then(function (answer) {
        if (!response.ok) { throw new Error(answer.error || ("HTTP " + response.status)); }
        return answer;
      });
    });
  }

  // The queue ----------------------------------------------------------------------------------
  function showLabel(item, answer) {
    item.setAttribute("data-label", answer.summary);
    item.setAttribute("data-verdict", answer.verdict || "");
    item.setAttribute("data-human", answer.human || "");
    item.querySelector(".label-text").textContent = answer.text;
  }

  function show(n) {
    if (!items.length) { return; }
    current = Math.max(0, Math.min(items.length - 1, n));
    items.forEach(function (item, k) { item.classList.toggle("current", k === current); });
    fill(items[current]);
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
    (local ? storeLocally(item, body) : storeOnServer(item, body)).then(function (answer) {
      showLabel(item, answer);
      status.textContent = "saved: " + answer.text;
      counted();
      if (change.verdict || change.human) { show(current + 1); }
    }).catch(function (error) {
      status.textContent = "not saved: " + error.message;
    });
  }

  function start(data) {
    if (items.length || !data.queue.length) { return; }
    rows = data.rows || {};
    blobs = data.blobs || "";
    var sections = document.createDocumentFragment();
    items = data.queue.map(function (it, i) {
      var item = build(it, i);
      item.addEventListener("click", function () { show(i); });
      sections.appendChild(item);
      return item;
    });
    root.appendChild(sections);
    if (local) {
      items.forEach(function (item) {
        var label = saved[keyOf(item)];
        if (!label) { return; }
        showLabel(item, describe(label));
        item.querySelector("textarea.comment").value = label.comment || "";
      });
      refreshDownload();
    }
    // Start at the first result nobody has labelled yet.
    current = 0;
    for (var i = 0; i < items.length; i += 1) {
      if (!items[i].getAttribute("data-label")) { current = i; break; }
    }
    counted();
    show(current);
    document.body.setAttribute("data-labelling", "ready");
  }

  if (panel) {  // the report builds its queue when the panel is first opened
    panel.addEventListener("toggle", function () {
      if (panel.open) { loadQueue().then(start).then(function () { show(current); }); }
    });
    download.addEventListener("click", function (event) {
      if (!items.length || !refreshDownload()) {
        event.preventDefault();
        status.textContent = "no pass/fail labels to download yet";
      }
    });
  } else {
    loadQueue().then(start);
  }

  document.addEventListener("keydown", function (event) {
    if (!items.length || (panel && !panel.open)) { return; }  // the report's page keys stay its own
    var target = event.target;
    var inComment = target && target.classList && target.classList.contains("comment");
    if (inComment) {
      if (event.key === "Escape") { target.blur(); }
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        target.blur();
        save({});
      }
      return;
    }
    if (target && /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName)) { return; }  // typing elsewhere
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
}());
