from recipes.experiments.xcls.cli import main

main()
