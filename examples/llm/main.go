package main

import "github.com/baton-rt/baton/owner"

// about is the text --help shows above the flags.
const about = `Runs an owner of an LLM agent: each step is one streamed OpenAI-compatible
Chat Completions call (OpenAI, vLLM, llama.cpp server, Ollama, LiteLLM; the
server from OPENAI_BASE_URL, the key from OPENAI_API_KEY) plus the tool calls
it asked for (calculator, remember, recall, and the tools of the MCP servers
of --mcp-command and --mcp-url).

` + owner.DefaultAbout

func main() {
	agent, cfg := &Agent{}, DefaultConfig()
	owner.Main(agent, owner.WithName("llm"), owner.WithAbout(about), owner.WithFaultFlag(), // --fault: crash tests only
		owner.WithFlags(cfg.Register, func() error { return agent.configure(cfg) }), // connects the MCP servers
		owner.WithCleanup(agent.Close))
}
