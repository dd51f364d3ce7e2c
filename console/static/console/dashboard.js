/* RelayOps dashboard: draws the charts (Chart.js, vendored) and refreshes them and the numbers beside them
   from dashboard.json every few seconds. The window (1h, 24h, 7d) lives in the URL (?window=...), so a
   reload or a shared link keeps it; choosing another one refreshes in place and updates the URL.
   Served as a file: the Content-Security-Policy allows no inline script. */
(function () {
  "use strict";

  var root = document.getElementById("relayops-dashboard");
  if (!root || typeof Chart === "undefined") { return; }

  var url = root.getAttribute("data-url");
  var refreshMs = 1000 * Number(root.getAttribute("data-refresh-seconds") || 5);
  var windowName = root.getAttribute("data-window") || "1h";
  var charts = {};
  var timer = null;

  function pad(n) { return (n < 10 ? "0" : "") + n; }

  function timeLabel(epochSeconds) {
    var d = new Date(epochSeconds * 1000);
    var hm = pad(d.getUTCHours()) + ":" + pad(d.getUTCMinutes());
    return windowName === "1h" ? hm : pad(d.getUTCMonth() + 1) + "-" + pad(d.getUTCDate()) + " " + hm;
  }

  function points(pairs) {
    return (pairs || []).map(function (p) { return { x: p[0], y: p[1] }; });
  }

  var span = { from: null, to: null };  // the window's time axis, from the last refresh

  function timeOptions(yTitle) {
    return {
      animation: false, responsive: true, maintainAspectRatio: false, parsing: false,
      interaction: { mode: "nearest", intersect: false },
      scales: {
        x: { type: "linear", min: span.from, max: span.to,
             ticks: { callback: function (v) { return timeLabel(v); }, maxTicksLimit: 8 } },
        y: { beginAtZero: true, title: { display: !!yTitle, text: yTitle || "" } }
      },
      plugins: { legend: { position: "bottom" } }
    };
  }

  function lineSets(named) {
    return Object.keys(named).sort().map(function (name) {
      return { label: name, data: points(named[name]), pointRadius: 2, borderWidth: 1.5 };
    });
  }

  // What each chart draws, from one refresh's data.
  var builders = {
    depth: function (d) { return { type: "line", sets: lineSets(d.series.depth), y: "jobs" }; },
    throughput: function (d) { return { type: "line", sets: lineSets(d.series.throughput), y: "jobs / min" }; },
    dead_letters: function (d) { return { type: "line", sets: lineSets(d.series.dead_letters), y: "dead letters" }; },
    outbox: function (d) { return { type: "line", sets: lineSets({ "outbox lag": d.series.outbox_lag }), y: "seconds" }; },
    nodes: function (d) { return { type: "line", sets: lineSets(d.series.drains_alive), y: "drains alive" }; },
    refusals: function (d) { return { type: "line", sets: lineSets(d.series.refusals), y: "refusals" }; },
    percentiles: function (d) {
      var rows = d.percentiles.filter(function (r) { return d.chart_measures.indexOf(r.measure) >= 0; });
      var labels = rows.map(function (r) { return r.tenant + " " + r.label; });
      var sets = ["p50", "p95", "p99"].map(function (q) {
        return { label: q, data: rows.map(function (r) { return r[q]; }) };
      });
      return { type: "bar", sets: sets, labels: labels, y: "seconds" };
    }
  };

  function draw(key, spec) {
    var canvas = document.getElementById("chart-" + key);
    if (!canvas) { return; }
    var chart = charts[key];
    if (!chart) {
      var options = spec.type === "bar"
        ? { animation: false, responsive: true, maintainAspectRatio: false,
            scales: { y: { beginAtZero: true, title: { display: true, text: spec.y } } },
            plugins: { legend: { position: "bottom" } } }
        : timeOptions(spec.y);
      chart = charts[key] = new Chart(canvas, { type: spec.type, data: { labels: spec.labels || [], datasets: spec.sets }, options: options });
      return;
    }
    chart.data.labels = spec.labels || [];
    chart.data.datasets = spec.sets;
    if (spec.type !== "bar") {
      chart.options.scales.x.min = span.from;
      chart.options.scales.x.max = span.to;
    }
    chart.update("none");
  }

  function fillTable(key, table) {
    var element = document.getElementById("numbers-" + key);
    if (!element || !table) { return; }
    var body = document.createElement("tbody");
    if (!table.rows.length) {
      var empty = body.insertRow();
      empty.className = "dash-empty";
      var cell = empty.insertCell();
      cell.colSpan = table.columns.length;
      cell.textContent = "none";
    }
    table.rows.forEach(function (row) {
      var tr = body.insertRow();
      row.forEach(function (text) { tr.insertCell().textContent = text; });
    });
    element.replaceChild(body, element.tBodies[0]);
  }

  function fillOldest(oldest) {
    var box = document.getElementById("dash-oldest-due");
    box.textContent = "";
    if (!oldest) { box.textContent = "No job is due."; return; }
    box.appendChild(document.createTextNode("Oldest due job: "));
    var link = document.createElement("a");
    link.id = "dash-oldest-due-link";
    link.href = oldest.url;
    link.textContent = oldest.tenant + ":" + oldest.document_id;
    box.appendChild(link);
    box.appendChild(document.createTextNode(", waiting "));
    var waited = document.createElement("span");
    waited.id = "dash-oldest-due-waited";
    waited.textContent = oldest.waited_seconds.toFixed(3) + " s";
    box.appendChild(waited);
  }

  function render(data) {
    windowName = data.window;
    span = { from: data.now - data.window_seconds, to: data.now };
    Object.keys(builders).forEach(function (key) { draw(key, builders[key](data)); });
    Object.keys(data.tables).forEach(function (key) { fillTable(key, data.tables[key]); });
    fillOldest(data.oldest_due);
    var now = document.getElementById("dash-now");
    now.setAttribute("data-epoch", data.now);
    now.textContent = new Date(data.now * 1000).toISOString().replace("T", " ").slice(0, 19);
    root.setAttribute("data-window", data.window);
    root.setAttribute("data-refreshed", String(Date.now()));
    Array.prototype.forEach.call(root.querySelectorAll("[data-window-link]"), function (link) {
      var selected = link.getAttribute("data-window-link") === data.window;
      link.classList.toggle("selected", selected);
      if (selected) { link.setAttribute("aria-current", "true"); } else { link.removeAttribute("aria-current"); }
    });
  }

  var generation = 0;  // a window chosen while a refresh was in flight makes that refresh's answer stale

  function refresh() {
    clearTimeout(timer);
    var mine = ++generation;
    fetch(url + "?window=" + encodeURIComponent(windowName), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) { if (mine === generation) { render(data); } })
      .catch(function () { root.setAttribute("data-refresh-failed", String(Date.now())); })
      .then(function () { if (mine === generation) { timer = setTimeout(refresh, refreshMs); } });
  }

  Array.prototype.forEach.call(root.querySelectorAll("[data-window-link]"), function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault();
      windowName = link.getAttribute("data-window-link");
      var next = new URL(window.location.href);
      next.searchParams.set("window", windowName);
      window.history.replaceState(null, "", next.toString());
      refresh();
    });
  });

  refresh();
}());
