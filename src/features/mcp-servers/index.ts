// MCP servers (docs/mcp-servers.md): what the rest of Errand uses of the feature. service.ts
// hands the turn pipeline the opener of a turn's servers for Errand's own agent.
export { agentMcpOpener } from './agent.ts';
