// The upstream every bench target forwards to: a minimal keep-alive HTTP server, in its own
// process so it does not share an event loop with the target being measured.
import { createServer } from "node:http";

const body = Buffer.from('{"ok":true}');
const server = createServer((req, res) => {
  req.resume();
  // /upload answers once the whole body has come, as a server that reads its input does.
  if (req.url.startsWith("/upload")) {
    req.on("end", () => res.end(body));
    return;
  }
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
});
server.keepAliveTimeout = 60_000;
// Switches to whatever protocol a request asks for (h2c included) and echoes raw bytes, ignoring
// a FIN: the upstream an attacker hopes for, so `npm run soak` can show the gateway never lets an
// upgrade other than WebSocket through and ends every tunnel.
server.on("upgrade", (req, socket) => {
  socket.on("error", () => {});
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers.upgrade}\r\n\r\n`,
  );
  socket.on("data", (d) => socket.write(d));
});
server.listen(Number(process.argv[2] ?? 0), "127.0.0.1", () => {
  process.stdout.write(`${JSON.stringify({ listening: server.address().port })}\n`);
});

// Exit cleanly on signals so `node --cpu-prof` can write its profile.
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
