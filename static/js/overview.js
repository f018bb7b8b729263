// Draws the overview's GPU utilization heatmap (GPU index × node, or × runs of nodes on a large fleet)
// from #overview-heatmap-data, with cluster names above their columns and lines between clusters.
// Translated words come from the chart element's data- attributes.
(function () {
  "use strict";

  function draw() {
    var el = document.getElementById("overview-heatmap");
    var source = document.getElementById("overview-heatmap-data");
    if (!el || !source || typeof Plotly === "undefined") {
      return;
    }
    var h = JSON.parse(source.textContent);
    var words = el.dataset;
    var grouped = h.group > 1;
    var customdata = h.z.map(function (row, r) {
      return row.map(function (_, c) {
        var cell = h.spread[r][c];
        return [cell ? cell[0] : null, cell ? cell[1] : null, h.nodes[c]];
      });
    });
    var hover = grouped
      ? "%{x} (%{customdata[2]} " + words.nodes + ")<br>" + words.gpu + " %{y}: " + words.mean +
        " %{z:.0f} % (" + words.min + " %{customdata[0]:.0f}, " + words.max + " %{customdata[1]:.0f})<extra></extra>"
      : "%{x}<br>" + words.gpu + " %{y}: %{z:.0f} %<extra></extra>";
    var trace = {
      type: "heatmap",
      x: h.x,
      y: h.y,
      z: h.z,
      customdata: customdata,
      zmin: 0,
      zmax: 100,
      // Idle GPUs light, busy ones dark; gaps (no telemetry) show the gray plot background.
      colorscale: [[0, "#f4f8f2"], [0.25, "#c7e9b4"], [0.5, "#41b6c4"], [0.75, "#225ea8"], [1, "#081d58"]],
      hoverongaps: false,
      xgap: h.columns > 200 ? 0 : 1,
      ygap: 1,
      hovertemplate: hover,
      colorbar: { title: { text: words.util, side: "right" }, thickness: 10, len: 0.9, outlinewidth: 0 },
    };
    var shapes = [];
    var annotations = [];
    h.clusters.forEach(function (cluster, i) {
      if (i > 0) {
        shapes.push({
          type: "line", xref: "x", yref: "paper", x0: cluster.start - 0.5, x1: cluster.start - 0.5, y0: 0, y1: 1,
          line: { color: "#212529", width: 2 },
        });
      }
      annotations.push({
        x: (cluster.start + cluster.end) / 2, y: 1, xref: "x", yref: "paper", yanchor: "bottom",
        text: cluster.name, showarrow: false, font: { size: 11 },
      });
    });
    var layout = {
      margin: { l: 44, r: 10, t: 22, b: 8 },
      font: { size: 11 },
      plot_bgcolor: "#adb5bd",
      paper_bgcolor: "rgba(0,0,0,0)",
      xaxis: { showticklabels: false, ticks: "", showgrid: false, zeroline: false, fixedrange: true },
      yaxis: { title: { text: words.gpu }, autorange: "reversed", type: "category", fixedrange: true },
      shapes: shapes,
      annotations: annotations,
    };
    Plotly.newPlot(el, [trace], layout, { displayModeBar: false, responsive: true }).then(function () {
      if (h.group !== 1 || !words.nodeUrl) {
        return;
      }
      el.style.cursor = "pointer";
      el.on("plotly_click", function (event) {
        var id = event.points.length ? h.ids[event.points[0].pointIndex[1]] : null;
        if (id) {
          window.location.href = words.nodeUrl.replace("/0/", "/" + id + "/");
        }
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
})();
