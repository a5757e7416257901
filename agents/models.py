"""The agents app has no models of its own: Agent, MemoryRun, BankItem and Intervention live in
memory.models (identity sits with tenancy, below review and the agent surface; issue 17). The
app keeps its migrations, which created their tables."""
