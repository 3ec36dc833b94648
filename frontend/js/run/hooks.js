// The run page's read-only hooks for tests and the first-load benchmark (window.__runcast): what
// the store holds, the stream's state, and a summary of each chart.

import { allCharts } from "./charts.js";

const plotBox = (full) => ({
  box: { l: full._size.l, t: full._size.t, w: full._size.w, h: full._size.h },
  xrange: full.xaxis.range, yrange: full.yaxis.range,
});

/** Expose `page`'s hooks once, frozen. */
export function exposeHooks(page) {
  window.__runcast = Object.freeze({
    store: Object.freeze({ snapshot: () => page.store.snapshot() }),
    get stream() {
      return page.stream ? { open: page.stream.open, version: page.stream.version, mode: page.liveMode } : null;
    },
    charts: () => allCharts(page).map((c) => ({
      keys: c.sources.map((s) => s.key), level: c.level, pixelWidth: c.pixelWidth(), budget: c.budget(), points: c.pointCount(),
      sketch: c.sketch, // the light drawing before Plotly: its box, ranges and points (chart/sketch.js)
      plot: c.drawn && c.div._fullLayout ? plotBox(c.div._fullLayout) : null, // Plotly's, to compare
    })),
    get view() {
      return { range: page.view.range, smoothing: page.view.smoothing, log: page.view.log };
    },
    pointCount: () => (page.mainChart ? page.mainChart.pointCount() : 0),
  });
}
