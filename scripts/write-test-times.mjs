// Times the test commands the README states a duration for, and writes the figures into it,
// between <!-- unit-time --> and <!-- /unit-time --> (`npm run test:unit`) and, with
// --full, <!-- suite-time --> and <!-- /suite-time --> (`npm test`, several minutes: the whole
// suite, every redis-server it starts included). The figures are this machine's: run it where
// the README's reader would, and commit what it writes.
//
//   node scripts/write-test-times.mjs           # the unit suite alone, about a quarter minute
//   node scripts/write-test-times.mjs --full    # and the whole suite
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const root = new URL("..", import.meta.url).pathname;
const readme = new URL("../README.md", import.meta.url);

function timed(command, args) {
  const started = performance.now();
  const run = spawnSync(command, args, { cwd: root, stdio: "inherit" });
  if (run.status !== 0) throw new Error(`${command} ${args.join(" ")} failed: its time is not the suite's`);
  return (performance.now() - started) / 1000;
}

const figures = [["unit-time", `about ${Math.round(timed("npm", ["run", "-s", "test:unit"]))} s`]];
if (process.argv.includes("--full"))
  figures.push(["suite-time", `about ${Math.round(timed("npm", ["test"]) / 60)} minutes`]);

let text = readFileSync(readme, "utf8");
for (const [marker, figure] of figures) {
  const block = new RegExp(`<!-- ${marker} -->[\\s\\S]*?<!-- /${marker} -->`);
  if (!block.test(text)) throw new Error(`README.md has no <!-- ${marker} --> block`);
  text = text.replace(block, `<!-- ${marker} -->${figure}<!-- /${marker} -->`);
  console.log(`${marker}: ${figure}`);
}
writeFileSync(readme, text);
