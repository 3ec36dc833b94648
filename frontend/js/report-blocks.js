// The live blocks of a training report (docs/reports.md), drawn from their data: a classic script
// (no modules) so that a report's static export can carry it inline and run it offline. The report
// page (report.js) calls it again with fresh data as the run goes on; a chart is updated in place.
// Every text goes in through textContent: the data is the run's, never markup. Its own words are
// the catalogs' "reportBlock.*" messages, through the `text(key, values)` it is given: the page's
// t() (js/i18n.js), or in a static export runcastMessages() over the exported language's messages.
// The run's data (names, prompts, metrics) is marked data-user.
(function () {
  "use strict";

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function table(head, rows, text) {
    var t = el("table"), tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", text("reportBlock.col." + h))); });
    t.appendChild(el("thead")).appendChild(tr);
    var body = t.appendChild(el("tbody"));
    body.dataset.user = "";
    rows.forEach(function (r) {
      var line = body.appendChild(el("tr"));
      r.forEach(function (c) { line.appendChild(el("td", c)); });
    });
    return t;
  }

  function metrics(m) {
    return Object.keys(m || {}).sort().map(function (k) { return k + " " + m[k]; }).join(", ");
  }

  function chart(node, block, Plotly, text) {
    var plot = node.querySelector(".runcast-chart");
    if (!plot) {
      node.textContent = "";
      plot = node.appendChild(el("div", null, "runcast-chart"));
      node.appendChild(el("p", null, "runcast-chart-note"));
    }
    var traces = [], missing = [];
    block.keys.forEach(function (key) {
      var s = block.series && block.series[key];
      if (!s) { missing.push(key); return; }
      traces.push({ x: s.step, y: s.value, name: key, type: "scatter", mode: "lines" });
    });
    node.querySelector(".runcast-chart-note").textContent =
      missing.length ? text("reportBlock.notPublished", { keys: missing.join(", ") }) : "";
    node.dataset.points = String(traces.reduce(function (n, t) { return n + t.x.length; }, 0));
    if (!Plotly) { plot.textContent = text("reportBlock.needsPlotly"); return; }
    var range = [block.from, block.to].every(function (v) { return v !== null; }) ? [block.from, block.to] : undefined;
    Plotly.react(plot, traces, {
      margin: { l: 50, r: 10, t: 10, b: 40 }, height: 320, showlegend: true,
      xaxis: { title: { text: text("reportBlock.step") }, range: range }, legend: { orientation: "h" },
    }, { displayModeBar: false, responsive: true });
  }

  function fill(node, block, Plotly, text) {
    node.dataset.filled = "true";
    if (block.kind === "chart") return chart(node, block, Plotly, text);
    node.textContent = "";
    if (block.kind === "checkpoint") {
      var c = block.checkpoint;
      if (!c) { node.appendChild(el("p", text("reportBlock.noCheckpoint", { step: block.step }), "runcast-card")); return; }
      var card = node.appendChild(el("p", null, "runcast-card"));
      card.appendChild(el("span", text("reportBlock.checkpoint", { step: c.step, size: c.size })));
      if (c.sha256) card.appendChild(el("span", " sha256 " + c.sha256.slice(0, 12))).dataset.user = "";
      if (metrics(c.metrics)) card.appendChild(el("span", " " + metrics(c.metrics))).dataset.user = "";
      return;
    }
    var rows = block.rows || [];
    if (!rows.length) { node.appendChild(el("p", text("reportBlock.empty"), "runcast-empty")); return; }
    if (block.kind === "samples") {
      node.appendChild(table(["step", "key", "prompt", "output"], rows.map(function (r) {
        return [r.step, r.key, r.prompt, r.output];
      }), text));
    } else if (block.kind === "evals") {
      node.appendChild(table(["step", "suite", "task", "metrics"], rows.map(function (r) {
        return [r.step, r.suite, r.task, metrics(r.metrics)];
      }), text));
    } else {
      node.appendChild(table(["step", "change"], rows.map(function (r) { return [r.step === null ? "" : r.step, r.text]; }), text));
    }
  }

  /** A text(key, values) over one language's messages: "{name}" placeholders only (the reportBlock.* messages). */
  window.runcastMessages = function (messages) {
    return function (key, values) {
      var source = typeof messages[key] === "string" ? messages[key] : key;
      return source.replace(/\{(\w+)\}/g, function (all, name) {
        return values && values[name] !== undefined ? String(values[name]) : all;
      });
    };
  };

  /** Fill every div.runcast-block under root with its entry of blocks (matched by data-index); text: see above. */
  window.runcastFillBlocks = function (root, blocks, Plotly, text) {
    var byIndex = {};
    blocks.forEach(function (b) { byIndex[b.index] = b; });
    root.querySelectorAll(".runcast-block[data-index]").forEach(function (node) {
      var block = byIndex[node.dataset.index];
      if (block) fill(node, block, Plotly, text);
    });
  };
})();
