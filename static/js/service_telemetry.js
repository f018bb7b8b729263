// Draws an inference service's telemetry charts from the JSON the polled status partial carries
// (#service-telemetry-data), and redraws them in place (Plotly.react) each time htmx swaps it in.
(function () {
  "use strict";

  var layoutBase = {
    height: 230,
    margin: { l: 48, r: 48, t: 28, b: 32 },
    legend: { orientation: "h", y: -0.25, font: { size: 10 } },
    font: { size: 11 },
    xaxis: { type: "date" },
  };

  function layout(title, extra) {
    return Object.assign({}, layoutBase, { title: { text: title, font: { size: 12 } } }, extra || {});
  }

  function line(x, y, name, extra) {
    return Object.assign({ x: x, y: y, name: name, type: "scatter", mode: "lines", connectgaps: false }, extra || {});
  }

  function target(x, value, name) {
    var ys = x.map(function () { return value; });
    return line(x, ys, name, { line: { dash: "dash", color: "#dc3545", width: 1 } });
  }

  function percent(values) {
    return values.map(function (v) { return v === null ? null : v * 100; });
  }

  function draw() {
    var node = document.getElementById("service-telemetry-data");
    if (!node || typeof Plotly === "undefined") return;
    var data = JSON.parse(node.textContent);
    var labelNode = document.getElementById("service-telemetry-labels");
    var L = labelNode ? JSON.parse(labelNode.textContent) : {};
    var s = data.series, x = s.time, slo = data.slo;
    var config = { displayModeBar: false, responsive: true };
    var objective = "p" + Math.round(slo.objective * 1000) / 10;
    Plotly.react("chart-ttft", [
      line(x, s.ttft_p50, "p50"),
      line(x, s.ttft_p99, "p99"),
      target(x, slo.ttft_target_s, objective + " " + L.target),
    ], layout(L.ttft), config);
    Plotly.react("chart-tpot", [
      line(x, s.tpot_p50, "p50"),
      line(x, s.tpot_p99, "p99"),
      target(x, slo.tpot_target_s, objective + " " + L.target),
    ], layout(L.tpot), config);
    Plotly.react("chart-requests", [
      line(x, s.running, L.running),
      line(x, s.waiting, L.waiting),
    ], layout(L.requests), config);
    Plotly.react("chart-replicas", [
      line(x, s.replicas, L.replicas, { line: { shape: "hv" } }),
      line(x, s.waiting, L.waiting, { yaxis: "y2" }),
    ], layout(L.replicas_title, {
      yaxis: { title: { text: L.replicas }, rangemode: "tozero", dtick: 1 },
      yaxis2: { title: { text: L.waiting }, overlaying: "y", side: "right", rangemode: "tozero" },
    }), config);
    Plotly.react("chart-kv", [line(x, percent(s.kv_cache), L.kv_used)],
      layout(L.kv, { yaxis: { range: [0, 100] } }), config);
    Plotly.react("chart-tokens", [
      line(x, s.tokens_per_s, L.generated),
      line(x, s.prompt_tokens_per_s, L.prompt),
    ], layout(L.tokens), config);
  }

  document.addEventListener("htmx:afterSwap", function (event) {
    if (event.detail.target && event.detail.target.id === "service-telemetry-status") draw();
  });
  document.addEventListener("DOMContentLoaded", draw);
})();
