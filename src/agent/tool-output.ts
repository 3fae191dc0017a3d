// What progress events say about a tool's output (describeToolOutput).

import { oneLine } from '../text.ts';
import type { ToolResult } from './tools/index.ts';

/**
 * What an event says about a tool's output. The file tools return a structured result: its ok
 * flag and title are taken as they are. Other tools may return a string, where a refusal the
 * model can act on starts with "Error:" (a thrown error ends the call the same way); multi-line
 * strings are file contents or listings, so events get their size, not their text.
 */
export function describeToolOutput(output: unknown): { ok: boolean; summary: string } {
  if (isToolResult(output)) return { ok: output.ok, summary: oneLine(output.title) };
  if (typeof output !== 'string') return { ok: true, summary: oneLine(output) };
  if (output.startsWith('Error:')) return { ok: false, summary: oneLine(output.slice(6)) };
  const lines = output.split('\n').length;
  return { ok: true, summary: lines > 1 ? `${lines} lines` : oneLine(output) };
}

function isToolResult(output: unknown): output is ToolResult {
  return (
    typeof output === 'object' &&
    output !== null &&
    'ok' in output &&
    typeof output.ok === 'boolean' &&
    'title' in output &&
    typeof output.title === 'string' &&
    'text' in output &&
    typeof output.text === 'string'
  );
}
