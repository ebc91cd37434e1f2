// `node bench/otlp-sink.mjs <port>`: an OTLP/HTTP collector that reads each export, counts its
// spans and answers 200, for bench:cost's tracing rounds (BENCH_COST_TRACES). A process of its
// own: the bench blocks in wrk, and an exporter must not wait on a collector that cannot answer.
// SIGUSR2 prints the spans received so far.
import { createServer } from "node:http";

const port = Number(process.argv[2]);
let spans = 0;
const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      for (const rs of body.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? []) spans += (ss.spans ?? []).length;
    } catch {
      res.writeHead(400).end();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
});
process.on("SIGUSR2", () => console.error(`otlp sink: ${spans} spans received`));
server.listen(port, "127.0.0.1", () => console.log(`otlp sink listening on ${port}`));
