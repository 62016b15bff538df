from hub.faces.cli import main

main()
