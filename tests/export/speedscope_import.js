// Loads a Chrome trace JSON file with speedscope's own importer (the npm package
// `speedscope`, pinned by tests/export/CMakeLists.txt): an independent parser of the
// format meridian's --perfetto export writes.
//
// The package ships only its browser bundle; this runs it in node with the DOM stubbed
// out and calls the function the app calls for a dropped text file
// (importProfileGroupFromText(fileName, contents)), exposed by one line added at the
// bundle's start. Prints one JSON line: profiles, their names, frames, total weight; exits
// 1 when the import throws or yields nothing.
//
// usage: node speedscope_import.js SPEEDSCOPE_PACKAGE_DIR TRACE.json
'use strict';
const fs = require('fs');
const path = require('path');
const vm = require('vm');

const [pkgDir, tracePath] = process.argv.slice(2);
const rel = path.join(pkgDir, 'dist', 'release');
const bundle = fs.readdirSync(rel).find((f) => /^speedscope-.*\.js$/.test(f));
let src = fs.readFileSync(path.join(rel, bundle), 'utf8');
const head = '"use strict";(()=>{';
if (!src.startsWith(head)) {
  console.error('speedscope bundle: unexpected start; the pinned version changed?');
  process.exit(2);
}
src = head + 'globalThis.__mrdImport=()=>(typeof Ff==="function"?Ff:null);' +
      src.slice(head.length);

// Anything the app touches while starting up: a callable, constructible object whose
// every property is itself.
const stub = new Proxy(function () {}, {
  get: (t, k) => (k === Symbol.toPrimitive ? () => '' : k === 'then' ? undefined : stub),
  apply: () => stub,
  construct: () => stub,
  set: () => true,
});
for (const k of ['window', 'self']) globalThis[k] = globalThis;
for (const k of ['document', 'navigator', 'localStorage', 'matchMedia', 'HTMLElement',
                 'requestAnimationFrame', 'ResizeObserver', 'Image', 'addEventListener',
                 'removeEventListener', 'devicePixelRatio']) {
  if (!(k in globalThis)) globalThis[k] = stub;
}
globalThis.location = {hash: '', search: '', href: 'http://localhost/', protocol: 'http:'};
const log = console.log;
console.log = () => {};
console.time = console.timeEnd = () => {};
try {
  vm.runInThisContext(src, {filename: bundle});
} catch (e) {
  // the app's first render needs a real DOM; the importer is defined before it
}
const importText = globalThis.__mrdImport && globalThis.__mrdImport();
if (!importText) {
  console.error('speedscope bundle: importProfileGroupFromText not found');
  process.exit(2);
}
const text = fs.readFileSync(tracePath, 'utf8');
importText(path.basename(tracePath), text).then(
    (g) => {
      if (!g || !g.profiles || g.profiles.length === 0) {
        log(JSON.stringify({ok: false, why: g ? 'no profiles' : 'unrecognized format'}));
        process.exit(1);
      }
      const profiles = g.profiles.map((p) => {
        let frames = 0;
        const names = new Set();
        try {
          p.forEachFrame((f) => {
            frames++;
            names.add(f.name);
          });
        } catch (e) {
          frames = -1;
        }
        return {name: p.getName(), weight: p.getTotalWeight(), frames, names: [...names].sort()};
      });
      log(JSON.stringify({ok: true, profiles}));
    },
    (e) => {
      log(JSON.stringify({ok: false, why: String(e && e.stack || e).slice(0, 2000)}));
      process.exit(1);
    });
