// Validates GLB files with the Khronos glTF validator; prints one JSON report summary per file.
//   node validate.js FILE.glb...
const fs = require("fs");
const validator = require("gltf-validator");

(async () => {
  const out = {};
  for (const path of process.argv.slice(2)) {
    const report = await validator.validateBytes(new Uint8Array(fs.readFileSync(path)), { uri: path, maxIssues: 100 });
    out[path] = {
      errors: report.issues.numErrors,
      warnings: report.issues.numWarnings,
      infos: report.issues.numInfos,
      hints: report.issues.numHints,
      messages: report.issues.messages.map((m) => `${m.severity}:${m.code}:${m.pointer || ""}:${m.message}`),
      validatorVersion: report.validatorVersion,
    };
  }
  console.log(JSON.stringify(out, null, 1));
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
