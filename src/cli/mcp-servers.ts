// `--mcp-servers <file|json>` of `errand project create|update` and `errand job create`: the
// setting as JSON, inline or in a file (docs/mcp-servers.md). Only its being a JSON object is
// checked here; the server checks the rest and says what is wrong.
import { readFile } from 'node:fs/promises';
import type { CreateJobInput } from '../client/index.ts';
import { CliError, UsageError } from './errors.ts';

type McpServers = NonNullable<CreateJobInput['mcpServers']>;

/** The flag's value: `none` (or '') clears the setting, `{...}` is JSON, else a file of it. */
export async function readMcpServers(value: string): Promise<McpServers | null> {
  const given = value.trim();
  if (given === '' || given === 'none') return null;
  let text = given;
  if (!given.startsWith('{')) {
    try {
      text = await readFile(given, 'utf8');
    } catch {
      throw new CliError(`cannot read the MCP servers file ${given}`);
    }
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new UsageError(
      `--mcp-servers must be a JSON object of servers by name, or a file of one: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new UsageError('--mcp-servers must be a JSON object of servers by name');
  return parsed as McpServers;
}
