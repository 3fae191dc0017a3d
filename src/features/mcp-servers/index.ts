// MCP servers (docs/mcp-servers.md): what the rest of Errand uses of the feature.
export { engineMcpOpener } from './engines.ts';
export { connectRemote } from './remote.ts';
