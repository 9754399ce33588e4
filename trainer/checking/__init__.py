"""The checking engine: who runs what, and who trusts whom.

::

    CLI (no torch)                       runner.py, report.py, transport.py
     │  control socket: one frame per job, with the job, result and output pipes
     ▼
    checking server (torch)              server.py
     │  forks first, before any job:
     ├──► learner zygote                 learner/zygote.py
     │      │ forks one per check (two for a check on its own with two
     │      │ free CPUs: trusted/ahead.py), on a checker's request
     │      ▼
     │    learner process                learner/serve.py, loading.py, guard.py
     │      runs the learner's file; answers forward/backward calls
     │
     │  then, per job (a checker of the catalogue's own files, once done,
     │  may take the next job of the same exercise: server._Pool):
     └──► checker                        trusted/checker.py and the stages
            builds or inherits the plan, asks the zygote for a learner process,
            calls it through a proxy Function, compares, reports

What each holds and trusts:

* The **CLI** holds the validated spec, the learner's source and a random
  token. It sends them as one job, and believes only result frames that carry
  the token, read from a pipe that only the checker holds.
* The **server** imports torch once. Before it ever sees a job it forks the
  learner zygote; only then does it import the checker, stop being readable by
  other processes (not dumpable) and adopt orphans (subreaper). For a service
  that checks again (watch, grade, validate) it caches plans per spec and seed,
  so forked checkers start warm; a single check's checker works out its own.
* The **checker** holds the plan: inputs, upstream gradients, references and
  expected gradients. It never runs the learner's code: torch's autograd and
  gradcheck run here, on a proxy ``Function`` whose forward and backward ask
  the learner process. It alone writes the result pipe.
* The **learner zygote** and every **learner process** are forks of a state
  that never held a spec, a plan, a reference, an expected value, the result
  pipe or the token. A learner process gets the class name, the parameter
  names, the source and a socket; it answers with plain data (JSON and raw
  tensor bytes, :mod:`values`), never pickles. The zygote also hears which
  torch modules the stages' calls import on first use (``torch.func``'s
  ``torch._dynamo``) and imports them once: module names, nothing of a plan.
  A learner process looks like a plain ``python -c`` program that imported
  the file. It runs in a session of its own under a memory cap; when its
  check ends, the zygote ends it and every process it started, orphans
  included.

A cold check is a server started for one job; watch mode, grading, validation
and the benchmarks keep one server for many. The path is the same.

A bug of ours is never the learner's failure (:mod:`trainer.bugs`): a stage's
body, the checker outside the stages and a learner-side request handler send
their traceback as a ``bug`` frame or reply, the server as a ``bug`` header on
its control socket, and the CLI writes it to a file and exits 3. The stages
catch only :class:`~trainer.checking.trusted.proxy.LearnerFault`, whose
mistake is an id, never words to read back.
"""
