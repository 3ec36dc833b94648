// Bundle each page's ES modules into one file with esbuild: frontend/dist/<entry>.js for
// every `<script type="module" src="/js/<entry>.js">` of frontend/*.html, minified, with a
// source map beside it. A first load then asks for one module instead of a waterfall of 22.
//
// Run by scripts/install (after npm ci), by the Docker image's build stage, and by setup.py when a
// wheel or sdist is built from a checkout with node and esbuild (the wheel carries frontend/dist):
//
//     node vendor/build.mjs            (from the top of the checkout, or anywhere)
//
// frontend/dist/manifest.json names, per entry, its bundle and the sha256 of every source
// file that went into it (and of the bundle). The server serves a page with its bundle only
// while every one of those files is unchanged on disk; otherwise (an edited module not yet
// rebuilt) it serves the plain modules as before (backend/runcast_server/web/frontend.py).
//
// The bundles and the manifest are committed with the modules they were built from, so that
// every install has them, with node or without (`pip install -e .` of a checkout included);
// a test checks that the committed ones match the committed modules. After editing a module:
// run this and commit frontend/dist with it. The output is the same on every machine for one
// esbuild version (package-lock.json). The source maps are not committed: they name the
// modules, which the server serves beside the bundle, and are built here at install.

import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const frontend = process.argv[2] || join(here, "..", "frontend");
const out = join(frontend, "dist");
const tmp = join(frontend, "dist.tmp");
const sha256 = (path) => createHash("sha256").update(readFileSync(path)).digest("hex");

const entries = new Set();
for (const name of readdirSync(frontend).filter((f) => f.endsWith(".html")).sort()) {
  const html = readFileSync(join(frontend, name), "utf8");
  for (const m of html.matchAll(/<script type="module" src="\/(js\/[^"?#]+\.js)"><\/script>/g)) entries.add(m[1]);
}

rmSync(tmp, { recursive: true, force: true });
mkdirSync(tmp, { recursive: true });
const manifest = { esbuild: esbuild.version, bundles: {} };
for (const entry of [...entries].sort()) {
  const file = "dist/" + entry.replace(/^js\//, "").replace(/\//g, "-");
  const result = await esbuild.build({
    absWorkingDir: frontend,
    entryPoints: [entry],
    outfile: join(tmp, relative("dist", file)),
    bundle: true,
    format: "esm",
    minify: true,
    sourcemap: "linked",
    sourcesContent: false, // the map names the modules, which the server serves beside the bundle
    target: "es2020",
    metafile: true,
    logLevel: "warning",
  });
  const inputs = {};
  for (const input of Object.keys(result.metafile.inputs).sort()) inputs[input] = sha256(join(frontend, input));
  manifest.bundles[entry] = { file, sha256: sha256(join(tmp, relative("dist", file))), inputs };
}
writeFileSync(join(tmp, "manifest.json"), JSON.stringify(manifest, null, 1) + "\n");
rmSync(out, { recursive: true, force: true });
renameSync(tmp, out);
console.log(`vendor/build.mjs: ${entries.size} page bundles in ${relative(process.cwd(), out) || out}: ` +
  Object.entries(manifest.bundles).map(([e, b]) => `${e} (${Object.keys(b.inputs).length} modules)`).join(", "));
