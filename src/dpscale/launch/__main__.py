"""``python -m dpscale.launch --cell JSON --env PREFIX --out RESULT --log LOG``."""

from dpscale.launch.launcher import main

main()
