// The Plotly layout of a metric chart: its axes (x = step, tokens, wall time or time since start,
// as the chart's XMap says), the timeline's event lines, the legend, and the bottom margin a
// first draw sets itself.

import { escapeHtml, theme } from "../util.js";
import { markerLines } from "./markers.js";
import { flatRange } from "./sketch.js";

// A chart's first draw sets its bottom margin itself (the x axis's tick labels and title, and
// the legend's rows, measured at Plotly's default fonts) instead of leaving it to Plotly's
// automargin, which draws the whole chart a second time to grow the margin: about half of
// a first draw's time (docs/performance.md). The y axis keeps automargin (its labels fit the
// 56 px left margin; wider ones grow it without a second draw of the common case). Every
// later draw has automargin on again, and one follows the first at once, so a margin
// measured wrong (another font) lasts one frame, never longer.
const X_AXIS_BOTTOM = 50; // tick labels, title and the gaps around them under the plot, px
const LEGEND_ROW = 19; // one row of the horizontal legend at 11 px
const LEGEND_ITEM = 45; // each item's line sample and gaps, besides its text
const LEGEND_FONT = '11px "Open Sans", verdana, arial, sans-serif';
let measureCanvas = null;

/**
 * The bottom margin automargin would give: the x axis's labels and title, then the legend's
 * rows. Plotly lays a horizontal legend out in one row when every item fits the plot's width,
 * else in columns as wide as its widest item.
 */
export function firstBottomMargin(names, plotWidth) {
  if (!names.length) return X_AXIS_BOTTOM;
  if (!measureCanvas) measureCanvas = document.createElement("canvas").getContext("2d");
  measureCanvas.font = LEGEND_FONT;
  const widths = names.map((name) => LEGEND_ITEM + measureCanvas.measureText(name).width);
  const total = widths.reduce((a, b) => a + b, 0);
  const columns = total <= plotWidth ? names.length : Math.max(1, Math.floor(plotWidth / Math.max(...widths)));
  return X_AXIS_BOTTOM + LEGEND_ROW * Math.ceil(names.length / columns);
}

/**
 * The layout for the current theme. xmap: the chart's XMap; range: the view's x range in the
 * XMap's units (null: autorange); log: a log y axis; yRange: the user's y zoom (null: autorange);
 * markers: the timeline's events; flat: the value of a series flat on a linear axis (sketch.js,
 * flatLevel), which autoranges to flatRange(flat): Plotly's own autorange (a double click
 * included) keeps it, through autorangeoptions.
 */
export function chartLayout({ xmap, range, log, yRange, markers, flat = null }) {
  const t = theme();
  const xaxis = {
    title: { text: escapeHtml(xmap.axisTitle), standoff: 6 }, gridcolor: t.grid, zeroline: false, automargin: true,
    type: xmap.epoch ? "date" : "linear",
  };
  if (range) {
    xaxis.range = [xmap.toPlot(range[0]), xmap.toPlot(range[1])];
    xaxis.autorange = false;
  } else xaxis.autorange = true;
  const yaxis = { type: log ? "log" : "linear", gridcolor: t.grid, zeroline: false, exponentformat: "power", automargin: true };
  if (yRange) {
    yaxis.range = yRange;
    yaxis.autorange = false;
  } else {
    yaxis.autorange = true;
    if (flat !== null) {
      const [lo, hi] = flatRange(flat);
      yaxis.autorangeoptions = { minallowed: lo, maxallowed: hi };
    }
  }
  return {
    // The title is the card's heading (HTML): the toolbar sits in the top margin alone.
    margin: { l: 56, r: 12, t: 30, b: 8 },
    paper_bgcolor: t.bg, plot_bgcolor: t.bg, font: { color: t.fg },
    hovermode: "x unified", hoverlabel: { bgcolor: t.hoverbg, font: { color: t.fg } },
    xaxis, yaxis,
    yaxis2: { overlaying: "y", range: [0, 1], visible: false, fixedrange: true },
    shapes: markerLines(markers, xmap),
    showlegend: true,
    // Below the axis title, in the bottom margin that Plotly grows to hold it.
    legend: { orientation: "h", x: 0, xanchor: "left", y: 0, yref: "container", yanchor: "bottom", bgcolor: "rgba(0,0,0,0)", font: { size: 11 } },
  };
}
