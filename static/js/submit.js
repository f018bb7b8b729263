// The submit page (templates/workloads/workload_submit.html): the previews beside the form refresh themselves
// (htmx), this puts the errors they report at the fields, keeps the cluster choice to the chosen queue's clusters,
// and tells the previews when the editor was swapped (form <-> YAML) rather than typed in.
(function () {
  "use strict";
  var form = document.getElementById("submit-form");
  if (!form) { return; }

  // A preview that is refused (403, 404) or finds the spec wrong still replaces what it showed before.
  document.body.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id && target.id.indexOf("preview-") === 0 && event.detail.xhr.status >= 400) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });

  function clearErrors() {
    form.querySelectorAll("[data-errors-for]").forEach(function (box) {
      box.textContent = "";
      if (box.getAttribute("data-errors-for") === "") { box.classList.add("d-none"); }
    });
    form.querySelectorAll(".is-invalid").forEach(function (input) { input.classList.remove("is-invalid"); });
  }

  function show(box, messages) {
    messages.forEach(function (message) {
      var line = document.createElement("div");
      line.textContent = message;
      box.appendChild(line);
    });
  }

  // {"fields": {name: [messages]}, "general": [messages]}: what the first preview found, sent as an htmx event.
  document.body.addEventListener("spec-errors", function (event) {
    var found = event.detail || {};
    clearErrors();
    Object.keys(found.fields || {}).forEach(function (name) {
      var box = form.querySelector('[data-errors-for="' + CSS.escape(name) + '"]');
      var general = form.querySelector('[data-errors-for=""]');
      if (!box) {
        if (general) { show(general, (found.fields[name] || []).map(function (m) { return name + ": " + m; })); general.classList.remove("d-none"); }
        return;
      }
      show(box, found.fields[name]);
      var input = form.querySelector('[name="' + CSS.escape(name) + '"]');
      if (input) { input.classList.add("is-invalid"); }
    });
    var general = form.querySelector('[data-errors-for=""]');
    if (general && (found.general || []).length) {
      show(general, found.general);
      general.classList.remove("d-none");
    }
  });

  // The cluster choice offers the clusters of the chosen queue (its options say which queues are bound there).
  function fitClusters() {
    var queue = form.querySelector('select[name="queue"]');
    var cluster = form.querySelector('select[name="cluster"]');
    if (!queue || !cluster) { return; }
    cluster.querySelectorAll("option[data-queues]").forEach(function (option) {
      var bound = option.getAttribute("data-queues").split(" ");
      option.hidden = queue.value !== "" && bound.indexOf(queue.value) === -1;
      if (option.hidden && option.selected) { cluster.value = ""; }
    });
  }
  form.addEventListener("change", function (event) {
    if (event.target.name === "queue") { fitClusters(); }
  });

  // The editor was swapped (form <-> YAML): mark the active mode, and let the previews look again.
  document.body.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "spec-editor" || (event.detail.elt && event.detail.elt.id === "spec-editor")) {
      var mode = document.getElementById("spec-editor").getAttribute("data-mode");
      form.querySelectorAll("[data-mode-to]").forEach(function (button) {
        button.classList.toggle("active", button.getAttribute("data-mode-to") === mode);
      });
      fitClusters();
      document.body.dispatchEvent(new CustomEvent("spec-changed"));
    }
  });
  fitClusters();
})();
