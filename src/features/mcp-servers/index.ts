// MCP servers (docs/mcp-servers.md): what the rest of Errand uses of the feature. service.ts
// hands the turn pipeline the openers of a turn's servers: for Errand's own agent, and for an
// engine (its configuration, and the bridge to remote servers).
export { agentMcpOpener } from './agent.ts';
export { engineMcpOpener } from './engines.ts';
export { connectRemote } from './remote.ts';
