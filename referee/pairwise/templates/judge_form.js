(function () {
  "use strict";
  document.body.setAttribute("data-js", "on");
  var form = document.getElementById("judge-form");
  if (!form) { return; }
  var status = document.getElementById("judge-status");
  var button = form.querySelector("button");

  function say(text, state) {
    status.textContent = text;
    status.setAttribute("data-state", state);
    status.className = state === "failed" ? "warn" : "muted";
    button.disabled = state === "running";
  }

  function answered(response) {
    return response.json().then(function (answer) {
      if (!response.ok) { throw new Error(answer.error || ("HTTP " + response.status)); }
      return answer;
    });
  }

  function poll(job) {
    fetch(form.getAttribute("data-status") + "?job=" + encodeURIComponent(job),
          {credentials: "same-origin"}).then(answered).then(function (answer) {
      if (answer.state === "running") {
        say("judging… " + answer.done + (answer.total ? " of " + answer.total : "") +
            " pair(s) done", "running");
        window.setTimeout(function () { poll(job); }, 400);
      } else if (answer.state === "done") {
        say("done; showing the result", "done");
        window.location.assign(answer.href);
      } else {
        say("The judged comparison failed: " + answer.error, "failed");
      }
    }).catch(function (error) {
      say("The judged comparison's progress cannot be read: " + error.message, "failed");
    });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var questions = form.elements.questions.value.split("\n").map(function (line) {
      return line.trim();
    }).filter(function (line) { return line.length > 0; });
    var body = {
      a: form.getAttribute("data-a"),
      b: form.getAttribute("data-b"),
      criterion: questions.length ? "" : form.elements.criterion.value,
      questions: questions,
      judge: form.elements.judge.value.trim(),
      both_orders: form.elements.both_orders.checked
    };
    say("asking the judge…", "running");
    fetch(form.getAttribute("data-post"), {
      method: "POST",
      credentials: "same-origin",
      headers: {"Content-Type": "application/json", "X-Referee-Token": form.getAttribute("data-token")},
      body: JSON.stringify(body)
    }).then(answered).then(function (answer) {
      poll(answer.job);
    }).catch(function (error) {
      say("The judged comparison failed: " + error.message, "failed");
    });
  });

  if (form.getAttribute("data-job")) { poll(form.getAttribute("data-job")); }
}());
