// Marina's client side: the lineage graph (Cytoscape + dagre) and the run curves (Chart.js).
// Data comes from <script type="application/json"> elements the server rendered; no requests here.
"use strict";

const STATE_COLORS = {
  SUCCESS: "#3bb36b", FAILED: "#d9534f", RUNNING: "#3d7fe0", INTERRUPTED: "#f0a030", superseded: "#aaaaaa",
  cached: "#3bb36b", waiting: "#f0d030", blocked: "#d9534f",
};

function readJson(id) {
  return JSON.parse(document.getElementById(id).textContent);
}

const GRAPH_FONT = "11px sans-serif";

function textWidth(text) {
  const context = (textWidth.canvas ||= document.createElement("canvas")).getContext("2d");
  context.font = GRAPH_FONT;
  return context.measureText(text).width;
}

function marinaGraph(containerId, dataId) {
  // Each node is a box holding its label, sized to it, so that the dagre layout (which spaces
  // nodes by their boxes) never lets two labels overlap, however long the step names.
  const graph = readJson(dataId);
  const elements = [];
  for (const n of graph.nodes) {
    const color = STATE_COLORS[n.state] || (n.state.startsWith("run") ? "#3d7fe0" : "#888888");
    elements.push({ data: { id: n.id, label: n.label, url: n.url, color: color, focus: n.focus ? 1 : 0,
      width: Math.ceil(textWidth(n.label)) + 16 } });
  }
  for (const e of graph.edges) elements.push({ data: { source: e.source, target: e.target } });
  cytoscape.use(cytoscapeDagre);
  const cy = cytoscape({
    container: document.getElementById(containerId),
    elements: elements,
    maxZoom: 1.6,
    layout: { name: "dagre", rankDir: "LR", nodeSep: 16, rankSep: 40 },
    style: [
      { selector: "node", style: { shape: "round-rectangle", "background-color": "data(color)",
        label: "data(label)", "font-size": 11, "font-family": "sans-serif", color: "#10202f",
        "text-valign": "center", "text-halign": "center", width: "data(width)", height: 24 } },
      { selector: "node[focus = 1]", style: { "border-width": 3, "border-color": "#16324f" } },
      { selector: "edge", style: { width: 1.5, "line-color": "#9aa", "target-arrow-color": "#9aa",
        "target-arrow-shape": "triangle", "curve-style": "bezier" } },
    ],
  });
  cy.on("tap", "node", (evt) => { const url = evt.target.data("url"); if (url) window.location.href = url; });
  window.marinaCy = cy;
}

function smooth(values, weight) {
  // Exponential moving average with TensorBoard's debiasing, so the first points are not pulled to 0.
  if (!weight) return values;
  let last = 0, out = [];
  values.forEach((v, i) => { last = last * weight + (1 - weight) * v; out.push(last / (1 - Math.pow(weight, i + 1))); });
  return out;
}

function marinaRuns(dataId, settingsId) {
  const runs = readJson(dataId), settings = readJson(settingsId);
  const palette = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
  const xIndex = settings.x === "tokens" ? 1 : 0;
  window.marinaCharts = {};
  for (const canvas of document.querySelectorAll("canvas[data-field]")) {
    const field = canvas.dataset.field;
    const datasets = [];
    runs.forEach((run, i) => {
      const points = run.series[field];
      if (!points) return;
      const ys = smooth(points.map((p) => p[2]), settings.smooth);
      datasets.push({ label: run.name, borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length],
        data: points.map((p, j) => ({ x: p[xIndex], y: ys[j] })), pointRadius: 1.5, borderWidth: 1.5 });
    });
    if (!datasets.length) { canvas.parentElement.style.display = "none"; continue; }
    window.marinaCharts[field] = new Chart(canvas, {
      type: "line",
      data: { datasets: datasets },
      options: {
        animation: false, parsing: false,
        scales: { x: { type: settings.logx ? "logarithmic" : "linear", title: { display: true, text: settings.x } },
                  y: { type: settings.logy ? "logarithmic" : "linear" } },
        plugins: { legend: { labels: { boxWidth: 12 } } },
      },
    });
  }
}
