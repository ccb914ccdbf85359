#!/bin/bash
# Description: the checks of python_samples.sh with the samples placed into cuda:0
# (staged path: pinned staging and device copies), on dmafs and off it. Skips (77)
# without torch and a CUDA GPU.
[ -n "$BASH_VERSION" ] || exec bash "$0" "$@"
. "$(dirname "$0")/t_lib.sh"
t_require_torch 'import torch; assert torch.cuda.is_available(), "torch.cuda.is_available() is False"' "needs torch with a CUDA GPU"
SAMPLES_DEVICE=cuda:0 exec bash "$(dirname "$0")/python_samples.sh"
