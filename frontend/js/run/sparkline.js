// A sparkline: a small inline SVG line of a series (non-finite values left out), its last
// point marked, with a text label for screen readers and as the hover title.

const SVG = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

/** An <svg> of `values` (evenly spaced), `width` × `height` pixels, labelled `label`. */
export function sparkline(values, label, width = 96, height = 24) {
  const svg = svgEl("svg", { class: "sparkline", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
  const title = svgEl("title", {});
  title.textContent = label;
  svg.append(title);
  const points = values.map((v, i) => [i, v]).filter(([, v]) => Number.isFinite(v));
  if (!points.length) return svg;
  const lo = Math.min(...points.map(([, v]) => v));
  const span = Math.max(...points.map(([, v]) => v)) - lo;
  const x = (i) => (values.length === 1 ? width / 2 : 2 + (i / (values.length - 1)) * (width - 4));
  const y = (v) => (span ? height - 3 - ((v - lo) / span) * (height - 6) : height / 2); // flat: across the middle
  const xy = points.map(([i, v]) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`);
  svg.append(svgEl("polyline", { points: xy.join(" "), fill: "none", stroke: "currentColor", "stroke-width": 1.5 }));
  const [i, v] = points[points.length - 1];
  svg.append(svgEl("circle", { cx: x(i).toFixed(1), cy: y(v).toFixed(1), r: 2.2, fill: "currentColor" }));
  return svg;
}
