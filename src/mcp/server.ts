// `errand mcp`: a Model Context Protocol server over stdio, so that a coding assistant can
// start and follow Errand jobs. A client of the job API through the typed client, like any
// other: it holds no state and reaches the service only at ERRAND_URL. stdout carries the
// protocol and nothing else; anything for a human goes to stderr.
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { ErrandClient } from '../client/index.ts';
import type { Config } from '../config.ts';
import { errandVersion } from '../version.ts';
import type { ToolDeps } from './tool.ts';
import { registerArchiveJob } from './tools/archive-job.ts';
import { registerCreateJob } from './tools/create-job.ts';
import { registerGetJob } from './tools/get-job.ts';
import { registerListJobs } from './tools/list-jobs.ts';
import { registerSendMessage } from './tools/send-message.ts';
import { registerWaitForJob } from './tools/wait-for-job.ts';

const TOOLS = [
  registerCreateJob,
  registerSendMessage,
  registerGetJob,
  registerListJobs,
  registerWaitForJob,
  registerArchiveJob,
];

const INSTRUCTIONS = `Errand runs an AI coding agent on a project's git repository in the background and opens a pull request with its changes. Start work with create_job, wait for it with wait_for_job, and give the user the pull request's URL (prLink) when the job is completed. Follow-up instructions on the same work go to send_message on the same job.`;

export async function createMcpServer(deps: ToolDeps): Promise<McpServer> {
  const server = new McpServer(
    { name: 'errand', title: 'Errand', version: errandVersion() },
    { instructions: INSTRUCTIONS },
  );
  for (const register of TOOLS) register(server, deps);
  return server;
}

/** Refuses to start without what every tool call needs: exit code 2, the reason on stderr. */
function usageError(message: string): void {
  process.stderr.write(`errand mcp: ${message}\n`);
  process.exitCode = 2;
}

export async function runMcp(config: Config): Promise<void> {
  const { url, apiKey, projectId } = config.client;
  // No admin.key fallback, unlike the admin commands: an MCP client starts this server from
  // wherever it likes, and silently handing a model the data directory's admin key would be
  // a surprise. The key to give it is a project key, named in the client's configuration.
  if (!apiKey) {
    usageError(
      'ERRAND_API_KEY is not set: give the server an Errand API key (a project key: errand key create --project ID) in the MCP client\'s "env" settings',
    );
    return;
  }
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error();
  } catch {
    usageError(`ERRAND_URL is not an http(s) URL: ${url}`);
    return;
  }
  const client = new ErrandClient({
    baseUrl: url,
    apiKey,
    ...(projectId ? { projectId } : {}),
    userAgent: 'errand-mcp',
  });
  const server = await createMcpServer({ client, defaultProject: projectId });
  await server.connect(new StdioServerTransport());
  // The client closing our stdin is the end of the session: stop waits in progress too, so
  // that no timer keeps the process alive.
  process.stdin.once('end', () => {
    void server.close();
  });
  process.stderr.write(
    `errand mcp: serving Errand at ${url} over stdio${projectId ? ` (default project ${projectId})` : ''}\n`,
  );
}
