"""Operations: the long-running processes the CLI starts and stops on this machine.

``daemon`` starts a process in its own session and stops exactly that process later (PID checked
against its start time); ``cluster`` is the one-node SLURM cluster of ``mnemoflow cluster``;
``local_llm`` is the llama.cpp server of ``mnemoflow serve local-llm``. In the package only the
CLI commands import it; the jobs, protocols and memory systems never do.
"""
