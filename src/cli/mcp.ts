// `errand mcp`: the Model Context Protocol server (src/mcp/) on stdio, loaded when it runs.
import { loadConfig } from '../config.ts';
import { defineCommand } from './command.ts';
import { EXIT } from './errors.ts';

export const mcp = defineCommand({
  name: 'mcp',
  options: { 'data-dir': { type: 'string', value: 'DIR' } },
  summary:
    'Model Context Protocol server on stdio, for coding assistants (ERRAND_URL, ERRAND_API_KEY, optional ERRAND_PROJECT)',
  details: `A Model Context Protocol server on stdio, for coding assistants: it starts and follows jobs
at ERRAND_URL with ERRAND_API_KEY, in ERRAND_PROJECT unless a tool call names a project.
`,
  async run({ values, io }) {
    const dataDir = values['data-dir'];
    const config = loadConfig(io.env, dataDir === undefined ? {} : { dataDir });
    const { runMcp } = await import('../mcp/server.ts');
    await runMcp(config);
    return EXIT.ok;
  },
});
