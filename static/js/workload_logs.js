// The Logs page's live tail: reads GET /api/v1/workloads/{id}/logs/ (the URL in #live-log's data-url) with fetch and
// its ReadableStream, appends each line as it arrives, keeps the last data-max-lines lines in the page, and keeps the
// end in view unless the reader has scrolled up. Changing the worker, the lines or Follow starts a new read.
// A followed log that ends early has ended with its workload; one that ran to the server's limit is followed again.
(function () {
  "use strict";

  var root = document.getElementById("live-log");
  if (!root || !window.fetch || !window.ReadableStream) { return; }
  var out = document.getElementById("log-lines");
  var status = document.getElementById("log-status");
  var labels = JSON.parse(document.getElementById("log-labels").textContent);
  var worker = document.getElementById("log-worker");
  var tail = document.getElementById("log-tail");
  var follow = document.getElementById("log-follow");
  var maxLines = parseInt(root.getAttribute("data-max-lines"), 10) || 2000;
  var limitMs = (parseInt(root.getAttribute("data-follow-max-s"), 10) || 3600) * 1000;
  var current = null;  // the read in progress: {id, abort}
  var reads = 0;
  var retry = null;

  function format(text, values) {
    return text.replace(/%\((\w+)\)s/g, function (match, key) { return key in values ? values[key] : match; });
  }

  function say(text, problem) {
    status.textContent = text;
    status.className = "small mb-1 " + (problem ? "text-danger" : "text-body-secondary");
    status.setAttribute("data-state", problem ? "problem" : "ok");
  }

  function atEnd() {
    return out.scrollHeight - out.scrollTop - out.clientHeight < 24;
  }

  function append(lines) {
    var stick = atEnd();
    var batch = document.createDocumentFragment();
    lines.forEach(function (line) {
      var span = document.createElement("span");
      span.textContent = line + "\n";  // text, never markup: a log line is the workload's to write
      batch.appendChild(span);
    });
    out.appendChild(batch);
    for (var extra = out.childElementCount - maxLines; extra > 0; extra -= 1) {
      out.removeChild(out.firstElementChild);
    }
    if (stick) { out.scrollTop = out.scrollHeight; }
  }

  function url(lines) {
    var params = new URLSearchParams({ tail: String(lines) });
    if (follow.checked) { params.set("follow", "1"); }
    if (worker.value !== "") { params.set("worker", worker.value); }
    return root.getAttribute("data-url") + "?" + params.toString();
  }

  function stop() {
    window.clearTimeout(retry);
    if (current) { current.abort.abort(); current = null; }
  }

  // `again`: a followed read picked up where the last one ended (no clearing, no old lines asked for again).
  function start(again) {
    stop();
    if (!again) { out.textContent = ""; }
    reads += 1;
    var read = { id: reads, abort: new AbortController(), followed: follow.checked, began: Date.now() };
    current = read;
    say(read.followed ? labels.following : labels.reading);
    fetch(url(again ? 0 : tail.value), {
      credentials: "same-origin",
      headers: { Accept: "text/plain" },
      signal: read.abort.signal,
    }).then(function (response) {
      if (!response.ok) {
        return response.json().catch(function () { return { message: response.statusText }; }).then(function (body) {
          refused(read, response, body);
        });
      }
      return pump(read, response.body.getReader());
    }).catch(function (error) {
      if (error.name === "AbortError" || current !== read) { return; }
      broke(read);
    });
  }

  function pump(read, reader) {
    var decoder = new TextDecoder();
    var pending = "";
    function next() {
      return reader.read().then(function (chunk) {
        if (current !== read) { reader.cancel(); return undefined; }
        if (chunk.done) {
          pending += decoder.decode();
          if (pending) { append([pending]); }
          ended(read);
          return undefined;
        }
        pending += decoder.decode(chunk.value, { stream: true });
        var lines = pending.split("\n");
        pending = lines.pop();
        if (lines.length) { append(lines); }
        return next();
      });
    }
    return next();
  }

  function ended(read) {
    current = null;
    if (read.followed && Date.now() - read.began >= limitMs - 5000) {
      say(labels.limit);
      start(true);
      return;
    }
    say(labels.ended);
  }

  function broke(read) {
    current = null;
    if (!read.followed) { say(labels.broken_read, true); return; }
    say(labels.broken, true);
    retry = window.setTimeout(function () { start(true); }, 3000);
  }

  function refused(read, response, body) {
    current = null;
    var message = body.message || response.statusText;
    Object.keys(body.fields || {}).forEach(function (field) {
      message += " " + field + ": " + [].concat(body.fields[field]).join(" ");
    });
    var wait = parseInt(response.headers.get("Retry-After"), 10);
    if (read.followed && wait > 0 && (response.status === 409 || response.status === 503)) {
      say(message + " " + format(labels.waiting, { seconds: wait }));
      retry = window.setTimeout(function () { start(false); }, wait * 1000);
      return;
    }
    say(message, true);
  }

  root.querySelector("form").addEventListener("submit", function (event) { event.preventDefault(); });
  [worker, tail, follow].forEach(function (control) {
    control.addEventListener("change", function () { start(false); });
  });
  out.addEventListener("scroll", function () {
    if (current && current.followed) { say(atEnd() ? labels.following : labels.paused); }
  });
  start(false);
})();
