// Plotly.js as every chart of the dashboard uses it: its options (toolbar, image export) and
// the promise that it has loaded.

/* global Plotly */

import { lang, t } from "../i18n.js";

// Plotly's own words (the toolbar's tooltips, its hints) by their English text, as its locale
// dictionaries key them, and the catalog's key for each: the modebar of a 2-D chart.
const PLOTLY_WORDS = {
  "Zoom": "plotly.zoom", "Pan": "plotly.pan", "Zoom in": "plotly.zoomIn", "Zoom out": "plotly.zoomOut",
  "Autoscale": "plotly.autoscale", "Reset axes": "plotly.resetAxes", "Download plot as a PNG": "plotly.downloadPng",
  "Download plot": "plotly.download", "Show closest data on hover": "plotly.hoverClosest",
  "Compare data on hover": "plotly.hoverCompare", "Toggle Spike Lines": "plotly.spikeLines",
  "Double-click to zoom back out": "plotly.zoomBack", "Double-click on legend to isolate one trace": "plotly.isolate",
};

/**
 * Plotly's locale for the page's language: its words; for date axes and their hover, month and
 * day names from Intl and the catalog's order of a date's parts (d3 time formats: "%b %-d, %Y",
 * "%Y年%-m月%-d日"). Built here from the catalog, so the partial bundle needs no Plotly locale
 * file registered, and a language is still only its catalog.
 */
function plotlyLocale(code) {
  const dictionary = Object.fromEntries(Object.entries(PLOTLY_WORDS).map(([en, key]) => [en, t(key)]));
  const names = (opts, n, at) => Array.from({ length: n }, (_, i) => new Intl.DateTimeFormat(code, { ...opts, timeZone: "UTC" }).format(at(i)));
  const month = (i) => new Date(Date.UTC(2024, i, 1));
  const day = (i) => new Date(Date.UTC(2024, 0, 7 + i)); // 2024-01-07 is a Sunday, as Plotly's lists start
  const format = {
    months: names({ month: "long" }, 12, month), shortMonths: names({ month: "short" }, 12, month),
    days: names({ weekday: "long" }, 7, day), shortDays: names({ weekday: "short" }, 7, day),
    year: t("date.axis.year"), month: t("date.axis.month"), dayMonth: t("date.axis.dayMonth"),
    dayMonthYear: t("date.axis.dayMonthYear"),
  };
  return { dictionary, format };
}

/** Exported images: publication size. */
export const EXPORT_SIZE = { width: 1600, height: 900 };

const SVG_ICON = { width: 1000, height: 1000, path: "M450 100h100v420l130-130 70 70-250 250-250-250 70-70 130 130z M150 800h700v100h-700z" };

/**
 * Plotly's options for every chart: no logo, no cloud ("Share chart" / Chart Studio), and
 * image export at publication size, PNG (Plotly's camera button) and SVG.
 */
export function plotConfig(filename) {
  const name = String(filename || "runcast").replace(/[^\w.-]+/g, "_").slice(0, 120);
  const code = lang();
  return {
    locale: code,
    locales: { [code]: plotlyLocale(code) },
    responsive: true,
    displaylogo: false,
    showSendToCloud: false,
    showEditInChartStudio: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d", "sendDataToCloud", "sendChartToCloud", "editInChartStudio"],
    toImageButtonOptions: { format: "png", filename: name, scale: 1, ...EXPORT_SIZE },
    modeBarButtonsToAdd: [{
      name: "downloadSvg",
      title: t("plotly.downloadSvg", { width: String(EXPORT_SIZE.width), height: String(EXPORT_SIZE.height) }),
      icon: SVG_ICON,
      click: (gd) => Plotly.downloadImage(gd, { format: "svg", filename: name, ...EXPORT_SIZE }),
    }],
  };
}

let plotlyReady = null;

/**
 * Resolves once Plotly.js has run. A page may load it `async` (its modules set the page up while
 * Plotly.js downloads), or only preload it (run.html: `<link rel="preload">`, so that its run
 * does not hold the first light drawing back): the first call here then runs it. A chart's draw
 * waits for it. Rejects when the script fails.
 */
export function whenPlotly() {
  if (typeof Plotly !== "undefined") return Promise.resolve();
  if (!plotlyReady) {
    plotlyReady = new Promise((resolve, reject) => {
      let script = document.querySelector('script[src*="/plotly.min.js"]');
      const preloaded = document.querySelector('link[rel="preload"][href*="/plotly.min.js"]');
      if (!script && preloaded) {
        script = document.createElement("script");
        script.src = preloaded.href;
        document.head.append(script);
      }
      if (!script) return reject(new Error("Plotly.js is not on this page"));
      // A script's load event follows its run in the same task: not run yet, so not fired yet.
      script.addEventListener("load", () => resolve(), { once: true });
      script.addEventListener("error", () => reject(new Error("Plotly.js could not be loaded")), { once: true });
    });
  }
  return plotlyReady;
}
