// Plotly.js as every chart of the dashboard uses it: its options (toolbar, image export) and
// the promise that it has loaded.

/* global Plotly */

/** Exported images: publication size. */
export const EXPORT_SIZE = { width: 1600, height: 900 };

const SVG_ICON = { width: 1000, height: 1000, path: "M450 100h100v420l130-130 70 70-250 250-250-250 70-70 130 130z M150 800h700v100h-700z" };

/**
 * Plotly's options for every chart: no logo, no cloud ("Share chart" / Chart Studio), and
 * image export at publication size, PNG (Plotly's camera button) and SVG.
 */
export function plotConfig(filename) {
  const name = String(filename || "runcast").replace(/[^\w.-]+/g, "_").slice(0, 120);
  return {
    responsive: true,
    displaylogo: false,
    showSendToCloud: false,
    showEditInChartStudio: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "sendDataToCloud", "sendChartToCloud", "editInChartStudio"],
    toImageButtonOptions: { format: "png", filename: name, scale: 1, ...EXPORT_SIZE },
    modeBarButtonsToAdd: [{
      name: "downloadSvg",
      title: `Download plot as SVG (${EXPORT_SIZE.width}×${EXPORT_SIZE.height})`,
      icon: SVG_ICON,
      click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: name, ...EXPORT_SIZE }),
    }],
  };
}

let plotlyReady = null;

/**
 * Resolves once Plotly.js has run. A page may load it `async` (run.html: its modules set the
 * page up while Plotly.js downloads); a chart's draw waits for it. Rejects when the script fails.
 */
export function whenPlotly() {
  if (typeof Plotly !== "undefined") return Promise.resolve();
  if (!plotlyReady) {
    plotlyReady = new Promise((resolve, reject) => {
      const script = document.querySelector('script[src*="/plotly.min.js"]');
      if (!script) return reject(new Error("Plotly.js is not on this page"));
      // A script's load event follows its run in the same task: not run yet, so not fired yet.
      script.addEventListener("load", () => resolve(), { once: true });
      script.addEventListener("error", () => reject(new Error("Plotly.js could not be loaded")), { once: true });
    });
  }
  return plotlyReady;
}
