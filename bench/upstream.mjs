// The upstream every bench target forwards to: a minimal keep-alive HTTP server, in its own
// process so it does not share an event loop with the target being measured.
import { createServer } from "node:http";

const body = Buffer.from('{"ok":true}');
const server = createServer((req, res) => {
  req.resume();
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ listening: server.address().port })}\n`);
});

// Exit cleanly on signals so `node --cpu-prof` can write its profile.
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
