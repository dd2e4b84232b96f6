// The Traffic page's charts: Chart.js (vendored, ./vendor/) fed by /console/traffic/data,
// fetched again every data-refresh seconds. The only script of the console besides the
// vendored libraries; loaded from this origin, as the Content-Security-Policy requires.
(function () {
  "use strict";
  var box = document.getElementById("charts");
  if (!box || typeof Chart === "undefined") { return; }
  var source = box.getAttribute("data-source");
  var every = Math.max(1, parseFloat(box.getAttribute("data-refresh") || "5")) * 1000;
  var palette = ["#1f4e8c", "#b35900", "#2e7d32", "#8e24aa", "#c62828", "#00838f"];

  function bar(id, horizontal) {
    return new Chart(document.getElementById(id), {
      type: "bar",
      data: { labels: [], datasets: [] },
      options: {
        animation: false,
        maintainAspectRatio: false,
        indexAxis: horizontal ? "y" : "x",
        plugins: { legend: { display: !horizontal } },
        scales: { x: { beginAtZero: true }, y: { beginAtZero: true } }
      }
    });
  }

  var tools = bar("chart-tools", true);
  var outcomes = bar("chart-outcomes", true);
  var latency = bar("chart-latency", false);

  function counts(chart, rows, label) {
    chart.data.labels = rows.map(function (r) { return r.label; });
    chart.data.datasets = [{ label: label, data: rows.map(function (r) { return r.count; }), backgroundColor: palette[0] }];
    chart.update();
  }

  function percentiles(chart, rows) {
    chart.data.labels = rows.map(function (r) { return r.label; });
    chart.data.datasets = ["p50", "p90", "p99"].map(function (q, i) {
      return { label: q, data: rows.map(function (r) { return r[q]; }), backgroundColor: palette[i + 1] };
    });
    chart.update();
  }

  function refresh() {
    fetch(source, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (answer) {
        if (answer.status === 401) { window.location.assign("/console/login"); return null; }
        return answer.ok ? answer.json() : null;
      })
      .then(function (data) {
        if (!data) { return; }
        counts(tools, data.tools, "calls");
        counts(outcomes, data.outcomes, "calls");
        percentiles(latency, [data.invoke].concat(data.methods));
      })
      .catch(function () { /* the next refresh tries again */ });
  }

  refresh();
  window.setInterval(refresh, every);
})();
