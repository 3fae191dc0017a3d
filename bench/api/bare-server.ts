// The "bare route" upper bound: a Fastify server with the GET job route's path, answering
// every request with a fixed JSON body (captured from the real service), with no
// authentication and no database. Started by run.ts as a child process:
//   node bench/api/bare-server.ts BODY_FILE
// prints "bare listening on http://127.0.0.1:PORT" once ready; stops on SIGTERM/SIGINT.
import { readFileSync } from 'node:fs';
import Fastify from 'fastify';

const bodyFile = process.argv[2];
if (!bodyFile) {
  process.stderr.write('usage: bare-server.ts BODY_FILE\n');
  process.exit(2);
}
const body = readFileSync(bodyFile, 'utf8');

const app = Fastify({ logger: false });
app.get('/v2/agent/:projectId/job/:id', (_request, reply) => {
  reply.code(200).type('application/json; charset=utf-8').send(body);
});
const url = await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`bare listening on ${url}\n`);

const stop = () => {
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
