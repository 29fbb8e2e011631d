from ragline.cli import main

main()
