"""Client-level differential privacy for the FedAvg family and FedSpray (DP-FedAvg, McMahan
et al. 2018; Flower's central DP with client-side fixed clipping).

Each client clips its update -- the shared parameters after local training minus those it
started from -- to the L2 norm :math:`C` (``<method>.dp-clip``); the server refuses an
upload beyond it, averages the clipped uploads with equal weights over the round's cohort
of :math:`\\bar k` clients (a missing one counts as no update) and adds Gaussian noise of
standard deviation :math:`zC/\\bar k` (``<method>.dp-noise`` :math:`= z`, or :math:`z`
calibrated from ``<method>.dp-epsilon``), drawn from the operating system's CSPRNG.
Flower's RDP accountant (Google's ``dp-accounting``) reports :math:`(\\varepsilon, \\delta)`
after every round.

- :mod:`~fgl_flower.dp.options`: the options and their checks (torch-free).
- :mod:`~fgl_flower.dp.clipping`: the client's clipped upload.
- :mod:`~fgl_flower.dp.accountant`: the accountant and the calibration of :math:`z`.
- :mod:`~fgl_flower.dp.noise`: the CSPRNG's standard normal values.
- :mod:`~fgl_flower.dp.server`: the server's noise and bookkeeping (:class:`CentralDP`).
"""
